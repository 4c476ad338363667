//! What the controller tells the binary after each interval.
//!
//! The `Serialize` form is meant to be logged as is, one object per node and
//! interval, so every input of the decision is in it: with the curve and P_numa one
//! can redo the threshold by hand.

use serde::{Deserialize, Serialize};

use crate::penalty::PenaltySource;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub node: u32,
    /// Most I/O-bound tasks to keep on the node during the next interval: the value to
    /// write into the BPF map. One above the learned threshold when `exploring`.
    pub threshold: u32,
    /// The NUMA penalty the contention was balanced against.
    pub p_numa: f64,
    pub p_numa_source: PenaltySource,
    /// (a, b, c) of the fitted P_cont(n) = a·n² + b·n + c, once the fit has points at
    /// three distinct n; `None` before.
    pub curve: Option<[f64; 3]>,
    /// The threshold the fitted curve asks for, within bounds but before hysteresis
    /// and rate limiting; `None` while the curve is not usable, when the threshold
    /// follows direct observations instead.
    pub n_star: Option<u32>,
    /// This interval tries one task more than the learned threshold, to see the curve
    /// there.
    pub exploring: bool,
    /// `placed` of the sample this decision answers.
    pub placed: u32,
    /// P_cont observed in that sample, if it had enough data to give a point.
    pub p_cont: Option<f64>,
    /// Under the throughput objective: the devices' completions per second in that
    /// sample, if it had enough of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// Under the throughput objective: what the next interval does ("settled",
    /// "probing up", "probing all", "probing down").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub climb: Option<String>,
}
