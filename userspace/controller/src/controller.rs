//! One node's controller: the steps of an interval, in order.
//!
//! 1. Read the sample: a NUMA ratio and a contention point, each only if the interval
//!    had enough data (`sample.rs`).
//! 2. Feed them to the P_numa average and to the curve fit (plus the direct evidence
//!    of that n).
//! 3. If neither gave anything, stop: the answer is the previous one, and no
//!    counter moves. An idle node, or one whose counters were garbage, must not drift
//!    on what it learned before; an exploration that got no data is still pending.
//! 4. The target: from the fitted curve if it is usable, else one step by direct
//!    evidence (`target.rs`, `evidence.rs`), balanced against what a spill costs:
//!    P_numa plus the wait for a CPU on the node spilled to (`penalty.rs`).
//! 5. Let the threshold follow the target under hysteresis and rate limit
//!    (`stability.rs`).
//! 6. If it did not move, and it has held still for `explore_every` informative
//!    intervals, and the node had the demand to fill one more slot, answer
//!    threshold + 1 for this one interval.

use crate::climb::{Climber, TASKS_PER_CPU};
use crate::config::{ControllerConfig, Objective};
use crate::decision::Decision;
use crate::evidence::Evidence;
use crate::fit::{QuadraticFit, Reference, Update};
use crate::penalty::{NumaPenalty, SpillContention};
use crate::persist::NodeState;
use crate::sample::{NodeSample, CONTENTION_MAX};
use crate::stability::{Governor, Limits};
use crate::target::fitted_target;

/// I/O-bound tasks a node may keep per CPU under the latency objective. The
/// balance of P_cont against P_numa decides how many; this only bounds it. One
/// per CPU was the bound until 2026-12-08, and it was the binding limit where
/// the tasks mostly wait for their device: 2-node VM, NVMe on node 1's 2 CPUs,
/// 4 fio jobs, lab at 2.0, P_cont(2) read 1.01-1.04 against P_numa + spill
/// 1.5, and `--threshold 4` read 1.05-1.17x the IOPS of the learned 2.
pub const LATENCY_TASKS_PER_CPU: u32 = 2;

/// How far below what a spill costs (P_numa + spill contention, as a
/// fraction of it) the contention at a threshold must be for the next task
/// up to be tried without waiting out `explore_every`, and for an
/// exploration measured that low to be kept at once.
const HEADROOM: f64 = 0.15;

/// Quiet intervals before an exploration where there is headroom: one, so the
/// threshold just taken is measured once more before the next is tried.
const HEADROOM_EXPLORE_AFTER: u32 = 1;

#[derive(Debug, Clone, PartialEq)]
pub struct NodeController {
    node: u32,
    cfg: ControllerConfig,
    min: u32,
    max: u32,
    /// The learned threshold (an exploring interval answers one more, but this stays).
    threshold: u32,
    numa: NumaPenalty,
    /// What a spilled task waits for a CPU on the next node: added to P_numa.
    spill: SpillContention,
    fit: QuadraticFit,
    evidence: Evidence,
    governor: Governor,
    /// Informative intervals since the threshold last moved or explored.
    since_explore: u32,
    /// The last answer was threshold + 1 (latency), or a probe (throughput).
    exploring: bool,
    /// Under the throughput objective, what chooses the threshold instead of the
    /// latency model (which still measures, for the stats).
    climber: Option<Climber>,
}

impl NodeController {
    /// A controller that knows nothing yet about `node`.
    ///
    /// `max_threshold` is the most tasks the node may ever keep (its CPU count, say);
    /// 0 is taken as 1. The lower bound is `cfg.min_threshold`, lowered to
    /// `max_threshold` if it is above. `initial_threshold` is clamped into the bounds.
    /// `cfg` should have passed [`ControllerConfig::validate`].
    pub fn new(
        node: u32,
        initial_threshold: u32,
        max_threshold: u32,
        cfg: &ControllerConfig,
    ) -> NodeController {
        let (min, max) = bounds(cfg, max_threshold);
        NodeController {
            node,
            cfg: cfg.clone(),
            min,
            max,
            threshold: initial_threshold.clamp(min, max),
            numa: NumaPenalty::new(),
            spill: SpillContention::default(),
            fit: QuadraticFit::new(max),
            evidence: Evidence::default(),
            governor: Governor::default(),
            since_explore: 0,
            exploring: false,
            climber: climber_for(cfg, min, max),
        }
    }

    pub fn node(&self) -> u32 {
        self.node
    }

    /// The learned threshold, without exploration.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    /// One control interval: takes what it measured, returns what to use next.
    pub fn step(&mut self, s: &NodeSample) -> Decision {
        let numa_learned = self
            .numa
            .observe(s.numa_ratio(self.cfg.min_samples), &self.cfg)
            && self.cfg.numa_penalty_override.is_none();
        self.spill
            .observe(s.spill_contention(self.cfg.min_samples), &self.cfg);
        // A point outside the bounds cannot be a real placement (the threshold never
        // allows it) and x = n / scale far above 1 would dominate the fit.
        let p_cont = s
            .contention(self.cfg.min_samples)
            .filter(|_| (1..=self.max).contains(&s.placed));
        if let Some(y) = p_cont {
            let reference = self.reference_for(s.placed, y);
            let (lambda, sigmas) = (self.cfg.lambda, self.cfg.outlier_sigmas);
            if self.fit.update(s.placed, y, reference, lambda, sigmas) == Update::Reset {
                self.evidence.clear();
            }
        }

        let (p_numa, p_numa_source) = self.numa.value(&self.cfg);
        let spill_contention = self.spill.value(&self.cfg);
        // What the next task pays if it is spilled: the interconnect, and the
        // wait for a CPU on the node it spills to.
        let p_spill = p_numa + spill_contention;
        let curve = self.curve();
        let n_star = match (curve, self.evidence.span()) {
            (Some(_), Some(observed)) => fitted_target(
                &self.fit,
                observed,
                self.threshold,
                (self.min, self.max),
                p_spill,
            ),
            _ => None,
        };

        if let Some(climber) = self.climber.as_mut() {
            let iops = s.completion_rate(self.cfg.min_samples);
            let climb = climber.step(iops, s.placed, self.threshold);
            self.threshold = climb.threshold;
            self.exploring = climb.answer != climb.threshold;
            return Decision {
                node: self.node,
                threshold: climb.answer,
                p_numa,
                p_numa_source,
                spill_contention,
                curve,
                n_star: None,
                exploring: self.exploring,
                placed: s.placed,
                p_cont,
                iops,
                climb: Some(climb.doing.to_string()),
            };
        }

        if numa_learned || p_cont.is_some() {
            let mut target = match n_star {
                Some(n) => n,
                None => self
                    .evidence
                    .target(self.threshold, p_spill, self.min, self.max),
            };
            // The balance assumes a task shed here is spilled. With no slot free
            // where it would go it runs unplaced instead: on the fair path, off
            // its device's node, and beside CPU hogs without the preemption a
            // placed task gets, a cost the balance does not weigh (2-node VM, 4
            // jobs beside stress-ng, lab off: threshold 1 read 0.66x the IOPS of
            // 2, whose P_cont had looked a little above P_numa + spill).
            if target < self.threshold && s.spill_room == Some(0) {
                target = self.threshold;
            }
            let mut next = self.governor.follow(self.threshold, target, self.limits());
            // An exploration that measured one more task well within what a spill
            // costs is kept at once: it was measured, not fitted, and waiting
            // `confirm_intervals` at the old threshold only repeats what is known
            // about it. A wrong keep is undone by the rule at the next intervals.
            if self.explored_clear(s, p_cont, p_spill) {
                next = self.threshold + 1;
                self.governor = Governor::default();
            }
            // Nor is a task shed on a spill cost still being learned: its first
            // intervals read low (see SpillContention), and a shed on them is
            // one the settled figure may not justify. The governor keeps
            // counting meanwhile, so a shed still due once the spill is known
            // is not confirmed all over again.
            if next < self.threshold && self.spill.warming(&self.cfg) {
                next = self.threshold;
            }
            self.exploring = false;
            if next != self.threshold {
                self.threshold = next;
                self.since_explore = 0;
            } else {
                self.since_explore = self.since_explore.saturating_add(1);
                if self.explore_due(s, p_spill) {
                    self.exploring = true;
                    self.since_explore = 0;
                }
            }
        }
        // Otherwise the interval taught nothing and the previous answer stands, an
        // exploration included: its interval has not been measured yet.
        let exploring = self.exploring;

        Decision {
            node: self.node,
            threshold: self.threshold + u32::from(exploring),
            p_numa,
            p_numa_source,
            spill_contention,
            curve,
            n_star,
            exploring,
            placed: s.placed,
            p_cont,
            iops: None,
            climb: None,
        }
    }

    /// Starts from what a profile run measured instead of from nothing: each
    /// `(n, P_cont)` point enters the fit and the evidence as a live interval at n
    /// would, `p_numa` (if the profile could measure it) becomes the first NUMA
    /// measurement, and the threshold is set to `threshold`, clamped into the bounds.
    /// Points outside the bounds or not finite are skipped, as in [`Self::step`].
    pub fn seed(&mut self, points: &[(u32, f64)], p_numa: Option<f64>, threshold: u32) {
        self.numa.observe(p_numa, &self.cfg);
        for &(n, y) in points {
            if !(y.is_finite() && (1..=self.max).contains(&n)) {
                continue;
            }
            let y = y.clamp(1.0, CONTENTION_MAX);
            let reference = self.reference_for(n, y);
            let (lambda, sigmas) = (self.cfg.lambda, self.cfg.outlier_sigmas);
            if self.fit.update(n, y, reference, lambda, sigmas) == Update::Reset {
                self.evidence.clear();
            }
        }
        self.threshold = threshold.clamp(self.min, self.max);
        self.since_explore = 0;
        self.exploring = false;
    }

    /// Records the point as evidence and says what the fit is to check it against:
    /// the median at n once n has one, else the curve once it is usable, else the
    /// largest value measured so far.
    fn reference_for(&mut self, n: u32, y: f64) -> Reference {
        let curve_usable = self.curve().is_some();
        let typical = self.evidence.largest();
        self.evidence.record(n, y);
        match (self.evidence.reference(n), curve_usable, typical) {
            (Some(median), _, _) => Reference::Median(median),
            (None, true, _) => Reference::Curve,
            (None, false, Some(value)) => Reference::Typical(value),
            (None, false, None) => Reference::Nothing,
        }
    }

    /// The fitted coefficients once there are points at three distinct n.
    fn curve(&self) -> Option<[f64; 3]> {
        let c = self.fit.coefficients();
        (self.evidence.distinct_n() >= 3 && c.iter().all(|v| v.is_finite())).then_some(c)
    }

    /// Exploration needs room above, demand (the node filled its threshold), and
    /// enough quiet intervals since the last move or exploration:
    /// `explore_every`, or only [`HEADROOM_EXPLORE_AFTER`] while the threshold's
    /// contention sits well below what a spill costs, one task more has not
    /// been measured, and requests still reach the node's devices from other
    /// nodes (a task a further slot would bring home). A node whose tasks
    /// mostly wait for their device climbs to its balance point in seconds,
    /// not in `explore_every` per task.
    fn explore_due(&self, s: &NodeSample, p_spill: f64) -> bool {
        let remote_demand = s.remote_lat.count >= self.cfg.min_samples;
        let quiet = if remote_demand && self.has_headroom(p_spill) {
            HEADROOM_EXPLORE_AFTER.min(self.cfg.explore_every)
        } else {
            self.cfg.explore_every
        };
        self.cfg.explore_every > 0
            && self.since_explore >= quiet
            && self.threshold < self.max
            && s.placed >= self.threshold
    }

    fn has_headroom(&self, p_spill: f64) -> bool {
        self.evidence
            .at(self.threshold)
            .is_some_and(|p| well_within(p, p_spill))
            && self.evidence.at(self.threshold + 1).is_none()
    }

    /// The interval just measured was an exploration, filled (threshold + 1
    /// placed), and its contention was well within what a spill costs.
    fn explored_clear(&self, s: &NodeSample, p_cont: Option<f64>, p_spill: f64) -> bool {
        self.exploring
            && s.placed == self.threshold + 1
            && self.threshold < self.max
            && p_cont.is_some_and(|y| well_within(y, p_spill))
    }

    fn limits(&self) -> Limits {
        Limits {
            min: self.min,
            max: self.max,
            confirm: self.cfg.confirm_intervals,
            max_step: self.cfg.max_step,
        }
    }

    /// Everything the next decision depends on, to persist.
    pub fn export(&self) -> NodeState {
        NodeState {
            node: self.node,
            threshold: self.threshold,
            max_threshold: self.max,
            fit: self.fit.to_state(),
            numa: self.numa.to_state(),
            spill: self.spill.to_state(),
            observed: self.evidence.to_state(),
            pending: self.governor.to_state(),
            since_explore: self.since_explore,
            exploring: self.exploring,
        }
    }

    /// A controller that continues from `state`, under today's configuration and
    /// bound. The threshold is clamped into the (possibly new) bounds; parts of the
    /// state that are not finite or out of range start afresh instead of being
    /// trusted, so this never fails.
    pub fn restore(
        state: &NodeState,
        cfg: &ControllerConfig,
        max_threshold: u32,
    ) -> NodeController {
        let (min, max) = bounds(cfg, max_threshold);
        let threshold = state.threshold.clamp(min, max);
        // The evidence's distinct n stand for the fit's points, so they go together.
        let (fit, evidence) = match QuadraticFit::from_state(&state.fit) {
            Some(fit) => (fit, Evidence::from_state(&state.observed, max)),
            None => (QuadraticFit::new(max), Evidence::default()),
        };
        NodeController {
            node: state.node,
            cfg: cfg.clone(),
            min,
            max,
            threshold,
            numa: NumaPenalty::from_state(&state.numa),
            spill: SpillContention::from_state(&state.spill),
            fit,
            evidence,
            governor: Governor::from_state(&state.pending),
            since_explore: state.since_explore,
            exploring: state.exploring && threshold < max,
            climber: climber_for(cfg, min, max),
        }
    }
}

/// A contention more than [`HEADROOM`] below what a spill costs.
fn well_within(p_cont: f64, p_spill: f64) -> bool {
    p_cont <= p_spill * (1.0 - HEADROOM)
}

/// (min, max) of the threshold: max at least 1, min within [1, max]. Under the
/// latency objective a node may keep [`LATENCY_TASKS_PER_CPU`] tasks per CPU,
/// under the throughput objective `TASKS_PER_CPU`.
fn bounds(cfg: &ControllerConfig, max_threshold: u32) -> (u32, u32) {
    let per_cpu = match cfg.objective {
        Objective::Latency => LATENCY_TASKS_PER_CPU,
        Objective::Throughput => TASKS_PER_CPU,
    };
    let max = max_threshold.max(1).saturating_mul(per_cpu);
    (cfg.min_threshold.clamp(1, max), max)
}

fn climber_for(cfg: &ControllerConfig, min: u32, max: u32) -> Option<Climber> {
    (cfg.objective == Objective::Throughput).then(|| Climber::new(min, max))
}
