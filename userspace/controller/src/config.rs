//! The controller's knobs, their defaults and the check that they make sense.
//!
//! One configuration serves every node; what differs per node (its id, its CPU count
//! as the upper bound of the threshold) is given to [`crate::NodeController::new`].

use serde::{Deserialize, Serialize};

/// The lowest and highest NUMA penalty the controller believes. Below 1 a remote
/// request would be faster than a local one, which would make spilling free; above
/// 10 the measurement is far more likely broken than the interconnect.
pub const NUMA_PENALTY_MIN: f64 = 1.0;
pub const NUMA_PENALTY_MAX: f64 = 10.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// Fewest requests (for latencies) or wake-ups (for the run delay) an interval
    /// needs before its mean is used. A mean of a handful of samples is mostly noise,
    /// and one bad interval must not steer the threshold.
    pub min_samples: u64,
    /// Weight of a new interval in the NUMA penalty's exponentially weighted moving
    /// average, in (0, 1]; 1 keeps only the last interval.
    pub numa_alpha: f64,
    /// The NUMA penalty used until the node has measured one. 1.3 is the prior of the
    /// research this scheduler builds on.
    pub numa_prior: f64,
    /// A fixed NUMA penalty that replaces both the prior and the measurement.
    pub numa_penalty_override: Option<f64>,
    /// Forgetting factor of the recursive least-squares fit, in (0, 1]: a point's
    /// weight is multiplied by it each time a newer point arrives, so the fit
    /// remembers roughly 1 / (1 - lambda) points and follows a changing workload.
    /// 1 never forgets.
    pub lambda: f64,
    /// Innovations (how far a new point lands from the fitted curve) are clipped at
    /// this many robust standard deviations, so one outlier moves the fit by a
    /// bounded amount.
    pub outlier_sigmas: f64,
    /// The lowest threshold ever returned. At least 1: a node hosting the devices
    /// always keeps some of their tasks.
    pub min_threshold: u32,
    /// Consecutive intervals the target must differ from the threshold, on the same
    /// side, before the threshold moves. 1 moves at once.
    pub confirm_intervals: u32,
    /// Most the threshold moves in one interval.
    pub max_step: u32,
    /// Intervals between two explorations (one interval at threshold + 1); 0 never
    /// explores, which freezes what the controller knows about larger thresholds.
    pub explore_every: u32,
    /// What the threshold is chosen for; see [`Objective`].
    pub objective: Objective,
}

/// What the controller optimises.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// The lesser-evil balance of P_cont(n) against P_numa, fitted (the model at the
    /// top of the crate); at most [`crate::LATENCY_TASKS_PER_CPU`] tasks per CPU.
    #[default]
    Latency,
    /// The node's device throughput, climbed by probing neighbouring thresholds
    /// (`climb.rs`); up to [`crate::TASKS_PER_CPU`] tasks per CPU.
    Throughput,
}

impl Default for ControllerConfig {
    fn default() -> ControllerConfig {
        ControllerConfig {
            min_samples: 50,
            numa_alpha: 0.2,
            numa_prior: 1.3,
            numa_penalty_override: None,
            lambda: 0.98,
            outlier_sigmas: 3.0,
            min_threshold: 1,
            confirm_intervals: 3,
            max_step: 1,
            explore_every: 20,
            objective: Objective::Latency,
        }
    }
}

impl ControllerConfig {
    /// Every rule a configuration must follow, checked in field order; the error
    /// names the first field that breaks one. The controller itself never panics on a
    /// configuration that fails this, but what it then does is unspecified.
    pub fn validate(&self) -> Result<(), String> {
        if self.min_samples == 0 {
            return Err("min_samples must be at least 1".into());
        }
        if !in_unit_interval(self.numa_alpha) {
            return Err(format!(
                "numa_alpha must be in (0, 1], got {}",
                self.numa_alpha
            ));
        }
        if !is_penalty(self.numa_prior) {
            return Err(format!(
                "numa_prior must be in [{NUMA_PENALTY_MIN}, {NUMA_PENALTY_MAX}], got {}",
                self.numa_prior
            ));
        }
        if let Some(p) = self.numa_penalty_override {
            if !is_penalty(p) {
                return Err(format!(
                    "numa_penalty_override must be in [{NUMA_PENALTY_MIN}, {NUMA_PENALTY_MAX}], got {p}"
                ));
            }
        }
        if !in_unit_interval(self.lambda) {
            return Err(format!("lambda must be in (0, 1], got {}", self.lambda));
        }
        // Below one sigma most good points would be clipped and the fit would crawl.
        if !(self.outlier_sigmas.is_finite() && self.outlier_sigmas >= 1.0) {
            return Err(format!(
                "outlier_sigmas must be finite and at least 1, got {}",
                self.outlier_sigmas
            ));
        }
        if self.min_threshold == 0 {
            return Err("min_threshold must be at least 1".into());
        }
        if self.confirm_intervals == 0 {
            return Err("confirm_intervals must be at least 1".into());
        }
        if self.max_step == 0 {
            return Err("max_step must be at least 1 (0 would never move)".into());
        }
        Ok(())
    }
}

/// (0, 1], NaN excluded.
fn in_unit_interval(x: f64) -> bool {
    x > 0.0 && x <= 1.0
}

fn is_penalty(x: f64) -> bool {
    (NUMA_PENALTY_MIN..=NUMA_PENALTY_MAX).contains(&x)
}
