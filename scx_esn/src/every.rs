// SPDX-License-Identifier: GPL-2.0-only
//! The run loop's periodic jobs, with one rule for a late loop.
//!
//! ```text
//!   time ─┬────────┬────────┬──── stall ────────────┬────────┬──►
//!         due      due      due (late)              due      due
//!                           └ next: one period after now, not the
//!                             periods missed in a burst
//! ```
//!
//! A loop that was held up (a slow map read, a suspended machine, a stopped
//! process) runs each job once and goes on from there: `--stats` prints one
//! long interval instead of a burst of near-empty ones, and the controller
//! takes one step over what it missed instead of several over nothing.

use std::time::{Duration, Instant};

/// The shortest period: a job due more often would keep the loop from
/// sleeping.
const MIN_PERIOD: Duration = Duration::from_millis(10);

/// A job due every `period`, first one period after it was made.
#[derive(Clone, Copy, Debug)]
pub struct Every {
    next: Instant,
    period: Duration,
}

impl Every {
    /// A period too long to add to `now` means never.
    pub fn new(period: Duration, now: Instant) -> Every {
        let period = period.max(MIN_PERIOD);
        Every {
            next: now.checked_add(period).unwrap_or_else(|| far_future(now)),
            period,
        }
    }

    /// Is the job due at `now`? If so, the next time is set: one period on,
    /// or one period after `now` when the loop is that late.
    pub fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = match self.next.checked_add(self.period) {
            Some(next) if next > now => next,
            _ => now
                .checked_add(self.period)
                .unwrap_or_else(|| far_future(now)),
        };
        true
    }

    /// When the job is due next: the loop sleeps no longer than this.
    pub fn next(&self) -> Instant {
        self.next
    }
}

/// A time the loop never reaches (about 30 years on).
fn far_future(now: Instant) -> Instant {
    now.checked_add(Duration::from_secs(1 << 30)).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn due_once_per_period_in_phase() {
        let t0 = Instant::now();
        let mut job = Every::new(SEC, t0);
        assert!(!job.due(t0));
        assert!(!job.due(t0 + SEC / 2));
        assert!(job.due(t0 + SEC + SEC / 10));
        assert!(!job.due(t0 + SEC + SEC / 5));
        // Still in phase with t0: due at 2 s, not 2.1 s.
        assert_eq!(job.next(), t0 + 2 * SEC);
    }

    #[test]
    fn a_late_loop_runs_the_job_once_not_a_burst() {
        let t0 = Instant::now();
        let mut job = Every::new(SEC, t0);
        let late = t0 + 10 * SEC + SEC / 2;
        assert!(job.due(late));
        assert!(!job.due(late), "the nine missed periods are not run");
        assert_eq!(job.next(), late + SEC);
    }

    #[test]
    fn odd_periods_neither_spin_nor_panic() {
        let t0 = Instant::now();
        let mut zero = Every::new(Duration::ZERO, t0);
        assert_eq!(zero.next(), t0 + MIN_PERIOD);
        assert!(zero.due(t0 + MIN_PERIOD));
        assert!(!zero.due(t0 + MIN_PERIOD));
        let mut never = Every::new(Duration::MAX, t0);
        assert!(never.next() > t0 + Duration::from_secs(1 << 29));
        assert!(!never.due(t0 + Duration::from_secs(3600)));
    }
}
