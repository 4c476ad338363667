//! The NUMA penalty P_numa: how much slower a request to this node's devices is when
//! it comes from another node.
//!
//! Each usable interval gives a ratio remote / local; the ratio is clamped to
//! [`NUMA_PENALTY_MIN`], [`NUMA_PENALTY_MAX`] *before* it enters the moving average,
//! so a single absurd interval can pull the average by at most alpha times the range,
//! and the average itself can never leave it. The first measurement replaces the
//! prior outright instead of being blended with it: the prior is a guess about some
//! other machine, one real interval already says more about this one.
//!
//! A spilled task pays more than the interconnect when the node it spills to is
//! busy too: it waits for a CPU there. [`SpillContention`] averages that wait
//! the same way, as a factor of the local request latency, and the controller
//! adds it to P_numa: crowding the device's node is the lesser evil whenever
//! P_cont(n) <= P_numa + spill contention. Until it is measured (nothing spilled
//! yet) it is 0: the next node is taken to have a free CPU.

use serde::{Deserialize, Serialize};

use crate::config::{ControllerConfig, NUMA_PENALTY_MAX, NUMA_PENALTY_MIN};
use crate::persist::{NumaState, SpillState};
use crate::sample::CONTENTION_MAX;

/// A moving average (EWMA) of per-interval values, each clamped into [lo, hi]
/// before it enters, the first replacing the lack of one outright; a stored average
/// out of range, or not a number, is dropped rather than trusted.
#[derive(Debug, Clone, PartialEq)]
struct BoundedAverage {
    /// `None` until the first value.
    ewma: Option<f64>,
    /// Intervals that contributed a value.
    samples: u64,
    lo: f64,
    hi: f64,
}

impl BoundedAverage {
    fn new(lo: f64, hi: f64) -> BoundedAverage {
        BoundedAverage {
            ewma: None,
            samples: 0,
            lo,
            hi,
        }
    }

    /// Adds an interval's value, if it has a finite one; returns whether it did.
    fn observe(&mut self, value: Option<f64>, alpha: f64) -> bool {
        let Some(v) = value.filter(|v| v.is_finite()) else {
            return false;
        };
        let v = v.clamp(self.lo, self.hi);
        self.ewma = Some(match self.ewma {
            None => v,
            Some(avg) => avg + alpha * (v - avg),
        });
        self.samples = self.samples.saturating_add(1);
        true
    }

    /// As [`BoundedAverage::observe`], but the first `1 / alpha` values are
    /// averaged plainly (weight `1 / samples`) before the EWMA takes over: the
    /// unbiased mean of what was seen, where an EWMA seeded by its first value
    /// would stay near that one value for `1 / alpha` intervals.
    fn observe_warming(&mut self, value: Option<f64>, alpha: f64) -> bool {
        let weight = alpha.max(1.0 / self.samples.saturating_add(1) as f64);
        self.observe(value, weight)
    }

    /// Whether it has some values, but fewer than `1 / alpha`.
    fn warming(&self, alpha: f64) -> bool {
        self.samples > 0 && (self.samples as f64) * alpha < 1.0
    }

    fn to_state(&self) -> NumaState {
        NumaState {
            ewma: self.ewma,
            samples: self.samples,
        }
    }

    fn from_state(s: &NumaState, lo: f64, hi: f64) -> BoundedAverage {
        let ewma = s.ewma.filter(|v| (lo..=hi).contains(v));
        BoundedAverage {
            ewma,
            samples: if ewma.is_some() { s.samples } else { 0 },
            lo,
            hi,
        }
    }
}

/// Where the P_numa of a decision came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PenaltySource {
    /// No interval had enough local and remote requests yet.
    Prior,
    /// The moving average of measured ratios.
    Measured,
    /// `numa_penalty_override` from the configuration.
    Override,
}

impl PenaltySource {
    /// Its name, as the JSON, the stats line and `/metrics` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            PenaltySource::Prior => "prior",
            PenaltySource::Measured => "measured",
            PenaltySource::Override => "override",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NumaPenalty(BoundedAverage);

impl NumaPenalty {
    pub(crate) fn new() -> NumaPenalty {
        NumaPenalty(BoundedAverage::new(NUMA_PENALTY_MIN, NUMA_PENALTY_MAX))
    }

    /// Adds an interval's ratio, if it has one; returns whether it did.
    pub(crate) fn observe(&mut self, ratio: Option<f64>, cfg: &ControllerConfig) -> bool {
        self.0.observe(ratio, cfg.numa_alpha)
    }

    /// The penalty to balance contention against, and where it came from.
    pub(crate) fn value(&self, cfg: &ControllerConfig) -> (f64, PenaltySource) {
        if let Some(p) = cfg.numa_penalty_override {
            return (p, PenaltySource::Override);
        }
        match self.0.ewma {
            Some(avg) => (avg, PenaltySource::Measured),
            None => (cfg.numa_prior, PenaltySource::Prior),
        }
    }

    pub(crate) fn to_state(&self) -> NumaState {
        self.0.to_state()
    }

    /// A stored average out of range falls back to the prior.
    pub(crate) fn from_state(s: &NumaState) -> NumaPenalty {
        NumaPenalty(BoundedAverage::from_state(
            s,
            NUMA_PENALTY_MIN,
            NUMA_PENALTY_MAX,
        ))
    }
}

/// What a task spilled to the next node waits there for a CPU, beyond an
/// uncontended wake-up, per local request latency: averaged like P_numa (same
/// alpha), clamped to [0, [`CONTENTION_MAX`]], 0 until measured.
///
/// Unlike P_numa's, its first `1 / alpha` values are a plain mean, and the
/// controller sheds no task while they come in ([`SpillContention::warming`]).
/// The first interval with a spilled task usually saw it for part of the
/// interval only and reads low (0.02, then 0.07-0.12, with a CPU hog on every
/// node of the 2-node VM), and an EWMA seeded by it climbed to the level of the
/// later ones only after some ten intervals: long enough for P_cont, a median
/// of three raw intervals, to clear P_numa + the spill by the tie margin and shed
/// a task the settled figures would have kept home (tests/vm control H,
/// 2026-12-02: threshold 2 -> 1 at second 12, spill 0.09 at the end).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpillContention(BoundedAverage);

impl Default for SpillContention {
    fn default() -> SpillContention {
        SpillContention(BoundedAverage::new(0.0, CONTENTION_MAX))
    }
}

impl SpillContention {
    /// Adds an interval's value, if it has one.
    pub(crate) fn observe(&mut self, value: Option<f64>, cfg: &ControllerConfig) {
        self.0.observe_warming(value, cfg.numa_alpha);
    }

    /// Measured in some intervals but fewer than `1 / alpha`: too few to weigh
    /// against P_cont yet. Never measured is not warming: then nothing was
    /// spilled, and there is nothing to wait for.
    pub(crate) fn warming(&self, cfg: &ControllerConfig) -> bool {
        cfg.numa_penalty_override.is_none() && self.0.warming(cfg.numa_alpha)
    }

    /// The average, 0 before any measurement. A configured P_numa override
    /// replaces the whole cost of a spill, this included.
    pub(crate) fn value(&self, cfg: &ControllerConfig) -> f64 {
        match cfg.numa_penalty_override {
            Some(_) => 0.0,
            None => self.0.ewma.unwrap_or(0.0),
        }
    }

    pub(crate) fn to_state(&self) -> SpillState {
        self.0.to_state()
    }

    /// An average out of range starts afresh.
    pub(crate) fn from_state(s: &SpillState) -> SpillContention {
        SpillContention(BoundedAverage::from_state(s, 0.0, CONTENTION_MAX))
    }
}
