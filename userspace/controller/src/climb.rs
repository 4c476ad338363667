//! The throughput objective: try a neighbouring threshold for one interval and keep
//! it if the node's devices completed more I/O there.
//!
//! The latency model (P_cont against P_numa) judges a spill by what one request pays,
//! with the local latency as yardstick. It cannot see what remote submitters do to
//! everyone else: in the lab a remote request burns its CPU before the doorbell, and
//! local requests got slower too (median device latency 850 us with two tasks of four
//! remote, 480 us with all four local). Nor can it keep more I/O-bound tasks than the
//! node has CPUs, although a task that mostly waits for its device leaves room for
//! others. This objective measures the thing the lesser-evil rule is about, the
//! throughput of the node's devices, and climbs it:
//!
//! ```text
//!            settle at t ──▶ probe a candidate (warm-up, then measure) ──▶ back at t
//!                 ▲              all: the ceiling   up: t + 1        │
//!                 │              down: t − 1                          ▼
//!                 │          verdict: IOPS(probe) against the mean of the
//!                 │          interval before it and the one after it (at t)
//!                 │            better by > `MARGIN`, twice in a row (or by
//!                 │            > `CLEAR_WIN` once) ──▶ move there, settle
//!                 └──────────── else try the next candidate; none better:
//!                               settle longer (doubling up to `SETTLE_MAX`)
//! ```
//!
//! * **Warm-up.** The first interval after the limit changes is not measured, on
//!   the probe's side nor on the way back: tasks are still moving, and in the lab the
//!   second in which six tasks came home completed a third of the steady rate either
//!   side of it.
//! * **Bracketing.** The probe is compared with the intervals on both sides of it, so
//!   a load that drifts slowly (a job finishing, the host slowing the guest) moves
//!   both sides and not the verdict.
//! * **All.** Throughput over the threshold need not be concave: in the lab at 8 jobs
//!   per 2-CPU node, 2 and 4 kept were worse than 1, and 8 (every job local) was
//!   1.6 times EEVDF. Stepping by one never finds that, so one candidate lifts the
//!   limit to the ceiling; the tasks placed during that interval are the demand, and a
//!   move goes there, not to the ceiling.
//! * **Demand.** A higher threshold only matters if the node filled the current one,
//!   a lower one only if the node holds more than it: other candidates are skipped.
//! * **No data.** An interval with fewer than `min_samples` completions does not
//!   count; the same interval is run again.

/// A probe must beat its brackets by this fraction to count as better.
pub(crate) const MARGIN: f64 = 0.05;
/// A win this large moves at once, without the second probe.
pub(crate) const CLEAR_WIN: f64 = 0.25;
/// Intervals at the threshold before the first probe, and after a move.
pub(crate) const SETTLE_MIN: u32 = 2;
/// Longest wait between two fruitless rounds of probes.
pub(crate) const SETTLE_MAX: u32 = 32;
/// I/O-bound tasks a node may keep per CPU under this objective: one that waits for
/// its device three quarters of the time leaves room for four.
pub const TASKS_PER_CPU: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Candidate {
    Up,
    All,
    Down,
}

/// The order candidates are tried in a round. `All` first: it is the one a step-by-one
/// climb cannot reach, and its probe shows the demand, which tells whether `Up` can
/// change anything at all.
const ORDER: [Candidate; 3] = [Candidate::All, Candidate::Up, Candidate::Down];
/// Where `Down` is in [`ORDER`]: a round that skips `Up` resumes there.
const DOWN_AT: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// At the threshold; `left` intervals to go before the next probe, whose left
    /// bracket is the last of them.
    Settle { left: u32 },
    /// The interval being measured runs at `value`. `warm`: it is the first there,
    /// while tasks move, and its rate is not used.
    Probe {
        cand: Candidate,
        value: u32,
        base: f64,
        warm: bool,
    },
    /// Back at the threshold, for the right bracket; `warm` as for `Probe`.
    Return {
        cand: Candidate,
        probe_rate: f64,
        probe_placed: u32,
        base: f64,
        warm: bool,
    },
}

/// What one step answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Climb {
    /// The learned threshold after this step.
    pub threshold: u32,
    /// What to put in force for the next interval: the threshold, or a probe.
    pub answer: u32,
    /// What the next interval does, for the stats.
    pub doing: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Climber {
    min: u32,
    ceiling: u32,
    phase: Phase,
    /// Candidates not yet tried in this round, in order.
    next: usize,
    /// The candidate that won the last verdict, awaiting its second.
    won_once: Option<Candidate>,
    settle: u32,
}

impl Climber {
    pub(crate) fn new(min: u32, ceiling: u32) -> Climber {
        Climber {
            min,
            ceiling: ceiling.max(min),
            phase: Phase::Settle { left: SETTLE_MIN },
            next: 0,
            won_once: None,
            settle: SETTLE_MIN,
        }
    }

    /// One interval: `rate` is the devices' completions per second in it (`None`
    /// without enough of them), `placed` the tasks the node held, `t` the threshold.
    pub(crate) fn step(&mut self, rate: Option<f64>, placed: u32, t: u32) -> Climb {
        let mut t = t.clamp(self.min, self.ceiling);
        let Some(rate) = rate else {
            // Nothing learned: the same interval again.
            return self.answer(t);
        };
        self.phase = match self.phase {
            Phase::Settle { left } if left > 1 => Phase::Settle { left: left - 1 },
            Phase::Settle { .. } => self.start_probe(rate, placed, t),
            Phase::Probe { warm: true, .. } | Phase::Return { warm: true, .. } => self.warmed(),
            Phase::Probe { cand, base, .. } => Phase::Return {
                cand,
                probe_rate: rate,
                probe_placed: placed,
                base,
                warm: true,
            },
            Phase::Return {
                cand,
                probe_rate,
                probe_placed,
                base,
                ..
            } => {
                let gain = probe_rate / ((base + rate) / 2.0) - 1.0;
                let target = self.move_value(cand, t, probe_placed);
                if gain > MARGIN && target != t {
                    if gain > CLEAR_WIN || self.won_once == Some(cand) {
                        t = target;
                        self.won_once = None;
                        self.settle = SETTLE_MIN;
                        // Momentum: the direction that paid is tried first.
                        self.next = ORDER.iter().position(|&c| c == cand).unwrap_or(0);
                        Phase::Settle { left: SETTLE_MIN }
                    } else {
                        self.won_once = Some(cand);
                        Phase::Probe {
                            cand,
                            value: self.probe_value(cand, t),
                            base: rate,
                            warm: true,
                        }
                    }
                } else {
                    self.won_once = None;
                    // With no more demand than t + 1, the ceiling's probe was Up's.
                    if cand == Candidate::All && probe_placed <= t + 1 {
                        self.next = self.next.max(DOWN_AT);
                    }
                    self.start_probe(rate, placed, t)
                }
            }
        };
        self.answer(t)
    }

    /// The next candidate of this round that can change anything, or a longer
    /// settle once the round is over.
    fn start_probe(&mut self, base: f64, placed: u32, t: u32) -> Phase {
        while self.next < ORDER.len() {
            let cand = ORDER[self.next];
            self.next += 1;
            let value = self.probe_value(cand, t);
            let useful = match cand {
                Candidate::Up | Candidate::All => placed >= t && value > t,
                Candidate::Down => value < t && placed > value,
            };
            let redundant = cand == Candidate::All && value <= t + 1;
            if useful && !redundant {
                return Phase::Probe {
                    cand,
                    value,
                    base,
                    warm: true,
                };
            }
        }
        self.next = 0;
        let left = self.settle;
        self.settle = (self.settle * 2).min(SETTLE_MAX);
        Phase::Settle { left }
    }

    /// The phase after its warm-up interval.
    fn warmed(&self) -> Phase {
        match self.phase {
            Phase::Probe {
                cand, value, base, ..
            } => Phase::Probe {
                cand,
                value,
                base,
                warm: false,
            },
            Phase::Return {
                cand,
                probe_rate,
                probe_placed,
                base,
                ..
            } => Phase::Return {
                cand,
                probe_rate,
                probe_placed,
                base,
                warm: false,
            },
            settled => settled,
        }
    }

    /// The threshold a candidate runs its probe at.
    fn probe_value(&self, cand: Candidate, t: u32) -> u32 {
        match cand {
            Candidate::Up => (t + 1).min(self.ceiling),
            Candidate::All => self.ceiling,
            Candidate::Down => t.saturating_sub(1).max(self.min),
        }
    }

    /// The threshold a candidate that won moves to: for `All`, the tasks the node
    /// held during its probe (the demand), not the ceiling.
    fn move_value(&self, cand: Candidate, t: u32, probe_placed: u32) -> u32 {
        match cand {
            Candidate::All => {
                probe_placed.clamp(t.saturating_add(1).min(self.ceiling), self.ceiling)
            }
            _ => self.probe_value(cand, t),
        }
    }

    fn answer(&self, t: u32) -> Climb {
        match self.phase {
            Phase::Probe { cand, value, .. } => Climb {
                threshold: t,
                answer: value,
                doing: match cand {
                    Candidate::Up => "probing up",
                    Candidate::All => "probing all",
                    Candidate::Down => "probing down",
                },
            },
            _ => Climb {
                threshold: t,
                answer: t,
                doing: "settled",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the climber against a throughput landscape: `iops(threshold, placed)`,
    /// with `demand` tasks wanting the node. Returns the thresholds learned.
    fn run(
        c: &mut Climber,
        mut t: u32,
        demand: u32,
        steps: usize,
        iops: impl Fn(u32) -> f64,
    ) -> Vec<u32> {
        let mut answer = t;
        let mut learned = Vec::new();
        for _ in 0..steps {
            let placed = answer.min(demand);
            let climb = c.step(Some(iops(placed)), placed, t);
            t = climb.threshold;
            answer = climb.answer;
            learned.push(t);
        }
        learned
    }

    #[test]
    fn finds_all_local_past_a_dip() {
        // The lab at 8 jobs on a 2-CPU node: 2 and 4 worse than 1, 8 best.
        let lab = |placed: u32| match placed {
            0..=1 => 1500.0,
            2..=3 => 1650.0,
            4..=7 => 1420.0,
            _ => 2850.0,
        };
        let mut c = Climber::new(1, 8);
        let learned = run(&mut c, 2, 8, 30, lab);
        assert_eq!(*learned.last().unwrap(), 8, "{learned:?}");
        let settled_at = learned.iter().position(|&t| t == 8).unwrap();
        assert!(settled_at < 8, "took {settled_at} intervals: {learned:?}");
    }

    #[test]
    fn a_costly_move_does_not_hide_a_better_place() {
        // As in the lab: the interval in which the tasks move completes a third of
        // the steady rate, which a probe measured at once would blame on the probe.
        let steady = |placed: u32| if placed >= 8 { 2850.0 } else { 1400.0 };
        let mut c = Climber::new(1, 8);
        let (mut t, mut answer, mut last_placed) = (2, 2, 2);
        for _ in 0..40 {
            let placed = answer.min(8);
            let moving = placed != last_placed;
            let rate = steady(placed) / if moving { 3.0 } else { 1.0 };
            let climb = c.step(Some(rate), placed, t);
            (t, answer, last_placed) = (climb.threshold, climb.answer, placed);
        }
        assert_eq!(t, 8);
    }

    #[test]
    fn a_move_to_all_goes_to_the_demand_not_the_ceiling() {
        let mut c = Climber::new(1, 16);
        let learned = run(&mut c, 2, 4, 30, |p| 1000.0 * f64::from(p));
        assert_eq!(*learned.last().unwrap(), 4, "{learned:?}");
    }

    #[test]
    fn climbs_down_when_fewer_is_better() {
        let mut c = Climber::new(1, 8);
        let learned = run(&mut c, 4, 4, 60, |p| 3000.0 - 500.0 * f64::from(p));
        assert_eq!(*learned.last().unwrap(), 1, "{learned:?}");
    }

    #[test]
    fn a_flat_landscape_holds_and_probes_less_and_less() {
        let mut c = Climber::new(1, 8);
        let mut probes = Vec::new();
        let (mut t, mut answer) = (2, 2);
        for i in 0..200 {
            let placed = answer.min(4);
            let climb = c.step(Some(2000.0), placed, t);
            t = climb.threshold;
            answer = climb.answer;
            if answer != t {
                probes.push(i);
            }
        }
        assert_eq!(t, 2);
        let early = probes.iter().filter(|&&i| i < 100).count();
        let late = probes.len() - early;
        assert!(late < early, "probes at {probes:?}");
    }

    #[test]
    fn one_noisy_win_is_not_a_move() {
        // Probe results alternate: a fluke 10 % win, then nothing.
        let mut c = Climber::new(1, 8);
        let mut t = 2;
        let mut answer = 2;
        let mut probe_count = 0;
        for _ in 0..40 {
            let placed = answer.min(4);
            let rate = if answer != t {
                probe_count += 1;
                if probe_count % 2 == 1 {
                    2200.0
                } else {
                    2000.0
                }
            } else {
                2000.0
            };
            let climb = c.step(Some(rate), placed, t);
            t = climb.threshold;
            answer = climb.answer;
        }
        assert_eq!(t, 2);
    }

    #[test]
    fn no_demand_above_no_probe_up() {
        let mut c = Climber::new(1, 8);
        for _ in 0..20 {
            // One task only, at threshold 2: raising changes nothing, lowering neither.
            let climb = c.step(Some(1000.0), 1, 2);
            assert_eq!(climb.answer, 2);
        }
    }

    #[test]
    fn intervals_without_data_change_nothing() {
        let mut c = Climber::new(1, 8);
        let before = c.clone();
        let climb = c.step(None, 3, 2);
        assert_eq!((climb.threshold, climb.answer), (2, 2));
        assert_eq!(c, before);
    }

    #[test]
    fn stays_within_bounds() {
        let mut c = Climber::new(2, 3);
        let learned = run(&mut c, 1, 10, 40, |p| 100.0 * f64::from(p));
        assert!(learned.iter().all(|&t| (2..=3).contains(&t)), "{learned:?}");
        assert_eq!(*learned.last().unwrap(), 3);
    }
}
