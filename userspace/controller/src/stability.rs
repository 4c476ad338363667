//! Hysteresis and rate limiting: how the threshold follows its target.
//!
//! A noisy target that flips between two values every other interval must not drag
//! the threshold along, and a target that jumps by ten must not move ten tasks to
//! another node at once (the estimate behind the jump may rest on one interval). So:
//!
//! * the target must sit on the same side of the threshold (above, or below) for
//!   `confirm_intervals` consecutive intervals before the threshold moves;
//! * once confirmed, the threshold moves by at most `max_step` per interval, and keeps
//!   moving every interval for as long as the target stays on that side, so a long
//!   way is not paid for with a fresh confirmation at each step;
//! * a target equal to the threshold, or on the other side, starts the count over.

use crate::persist::PendingState;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Governor {
    /// -1 below, +1 above, 0 none.
    side: i8,
    /// Consecutive intervals the target has been on `side`.
    count: u32,
}

/// Bounds and pace, taken from the configuration and the node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) min: u32,
    pub(crate) max: u32,
    pub(crate) confirm: u32,
    pub(crate) max_step: u32,
}

impl Governor {
    /// The threshold for the next interval, given the current one and the target.
    pub(crate) fn follow(&mut self, current: u32, target: u32, lim: Limits) -> u32 {
        let side: i8 = match target.cmp(&current) {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        };
        if side != self.side {
            self.side = side;
            self.count = 0;
        }
        if side == 0 {
            return current.clamp(lim.min, lim.max);
        }
        self.count = self.count.saturating_add(1);
        if self.count < lim.confirm {
            return current.clamp(lim.min, lim.max);
        }
        let step = target.abs_diff(current).min(lim.max_step);
        let next = if side > 0 {
            current.saturating_add(step)
        } else {
            current.saturating_sub(step)
        };
        next.clamp(lim.min, lim.max)
    }

    pub(crate) fn to_state(self) -> PendingState {
        PendingState {
            side: self.side,
            count: self.count,
        }
    }

    pub(crate) fn from_state(s: &PendingState) -> Governor {
        Governor {
            side: s.side.signum(),
            count: s.count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: Limits = Limits {
        min: 1,
        max: 16,
        confirm: 3,
        max_step: 2,
    };

    #[test]
    fn a_target_must_hold_before_the_threshold_moves() {
        let mut g = Governor::default();
        assert_eq!(g.follow(8, 12, LIM), 8);
        assert_eq!(g.follow(8, 12, LIM), 8);
        assert_eq!(g.follow(8, 12, LIM), 10);
        // Confirmed: it keeps going, rate limited, without a new confirmation.
        assert_eq!(g.follow(10, 12, LIM), 12);
        assert_eq!(g.follow(12, 12, LIM), 12);
    }

    #[test]
    fn a_flapping_target_never_moves_the_threshold() {
        let mut g = Governor::default();
        // Two intervals above, one below, over and over: never three on one side.
        for target in [9, 9, 7].iter().cycle().take(300) {
            assert_eq!(g.follow(8, *target, LIM), 8);
        }
    }

    #[test]
    fn switching_sides_starts_the_count_over() {
        let mut g = Governor::default();
        assert_eq!(g.follow(8, 12, LIM), 8);
        assert_eq!(g.follow(8, 12, LIM), 8);
        assert_eq!(g.follow(8, 4, LIM), 8);
        assert_eq!(g.follow(8, 4, LIM), 8);
        assert_eq!(g.follow(8, 4, LIM), 6);
    }

    #[test]
    fn bounds_hold_whatever_the_target() {
        let lim = Limits {
            confirm: 1,
            max_step: 100,
            ..LIM
        };
        let mut g = Governor::default();
        assert_eq!(g.follow(8, 0, lim), 1);
        assert_eq!(g.follow(1, 400, lim), 16);
        assert_eq!(g.follow(30, 30, lim), 16);
    }
}
