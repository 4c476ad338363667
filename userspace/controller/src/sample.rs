//! What one interval measured on a node, and the two ratios the controller reads
//! from it.
//!
//! Everything here comes from counters that may be torn, empty or nonsensical (a
//! division by a zero count upstream, a clock that went backwards), so a mean is only
//! used when it is a finite number in its range and enough samples stand behind it.
//! Anything else is "no data": it adds nothing rather than a wrong point.

use serde::{Deserialize, Serialize};

use crate::config::NUMA_PENALTY_MAX;

/// Contention observations are capped here. The threshold is decided where P_cont
/// crosses P_numa, which never exceeds [`NUMA_PENALTY_MAX`]; far above that, "how
/// much too slow" no longer matters, and an absurd but finite interval (a run delay
/// a million times the I/O) could otherwise drag the curve fit arbitrarily far.
pub const CONTENTION_MAX: f64 = 10.0 * NUMA_PENALTY_MAX;

/// A mean over `count` samples. `count` 0 means no data, whatever `mean_ns` says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStat {
    pub count: u64,
    pub mean_ns: f64,
}

impl LatencyStat {
    pub fn new(count: u64, mean_ns: f64) -> LatencyStat {
        LatencyStat { count, mean_ns }
    }

    /// The mean if at least `min_count` samples back it and it is a finite, positive
    /// duration. Used for device latencies, which are never zero, and are divided by.
    fn positive_mean(&self, min_count: u64) -> Option<f64> {
        let ok = self.count > 0
            && self.count >= min_count
            && self.mean_ns.is_finite()
            && self.mean_ns > 0.0;
        ok.then_some(self.mean_ns)
    }

    /// The same, but zero is a valid mean: a task that never waits for a CPU.
    fn non_negative_mean(&self, min_count: u64) -> Option<f64> {
        let ok = self.count > 0
            && self.count >= min_count
            && self.mean_ns.is_finite()
            && self.mean_ns >= 0.0;
        ok.then_some(self.mean_ns)
    }
}

/// One control interval of one node hosting NVMe devices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSample {
    /// I/O-bound tasks placed on the node during the interval (the caller's mean,
    /// rounded).
    pub placed: u32,
    /// Device latency of requests submitted from this node to its own devices.
    pub local_lat: LatencyStat,
    /// Device latency of requests to this node's devices submitted from other nodes.
    pub remote_lat: LatencyStat,
    /// Runnable-to-running delay of the placed I/O-bound tasks on this node, beyond
    /// an uncontended wake-up's ([`NodeWaits::io_contended_mean_ns`]).
    pub run_delay: LatencyStat,
    /// The same delay of the I/O-bound tasks placed on the node this one spills
    /// to first: what a spilled task waits there for a CPU. No samples where no
    /// task was placed there, or on a machine with one node.
    #[serde(default)]
    pub spill_delay: LatencyStat,
    /// Length of the interval in seconds; 0 when unknown.
    #[serde(default)]
    pub elapsed_s: f64,
    /// Free slots on the node this one spills to first over the interval (its
    /// limit less its mean of placed tasks), `None` where unknown or there is no
    /// such node. At 0 a task shed here finds no slot there and runs unplaced.
    #[serde(default)]
    pub spill_room: Option<u32>,
}

impl NodeSample {
    /// remote / local device latency: what one request pays for crossing the
    /// interconnect, as a factor. Needs `min_samples` on both sides. Not clamped here:
    /// the estimator decides what to believe.
    pub fn numa_ratio(&self, min_samples: u64) -> Option<f64> {
        let local = self.local_lat.positive_mean(min_samples)?;
        let remote = self.remote_lat.positive_mean(min_samples)?;
        let ratio = remote / local;
        ratio.is_finite().then_some(ratio)
    }

    /// Reads and writes the node's devices completed per second, from any node.
    /// Needs `min_samples` of them and a known interval length.
    pub fn completion_rate(&self, min_samples: u64) -> Option<f64> {
        let count = self.local_lat.count.saturating_add(self.remote_lat.count);
        let ok =
            count > 0 && count >= min_samples && self.elapsed_s.is_finite() && self.elapsed_s > 0.0;
        ok.then(|| count as f64 / self.elapsed_s)
    }

    /// 1 + run delay / local latency: how much longer a placed task's I/O round trip
    /// gets because it waits for a CPU before it can submit the next request, as a
    /// factor comparable with [`NodeSample::numa_ratio`]. Needs `min_samples` run
    /// delays; any local latency will do as the yardstick, since the run delay is the
    /// quantity the samples must back. At most [`CONTENTION_MAX`].
    pub fn contention(&self, min_samples: u64) -> Option<f64> {
        if self.placed == 0 {
            return None;
        }
        let delay = self.run_delay.non_negative_mean(min_samples)?;
        let local = self.local_lat.positive_mean(1)?;
        let p = 1.0 + delay / local;
        p.is_finite().then_some(p.min(CONTENTION_MAX))
    }

    /// spill delay / local latency: what a task spilled to the next node pays
    /// on top of P_numa, because it waits for a CPU there, in the same units as
    /// [`NodeSample::contention`] (whose 1 is the request itself). Needs
    /// `min_samples` waits on that node. At most [`CONTENTION_MAX`].
    pub fn spill_contention(&self, min_samples: u64) -> Option<f64> {
        let delay = self.spill_delay.non_negative_mean(min_samples)?;
        let local = self.local_lat.positive_mean(1)?;
        let p = delay / local;
        p.is_finite().then_some(p.min(CONTENTION_MAX))
    }
}

/// Runnable-to-running waits on one node, summed over CPUs: cumulative when
/// read, an interval's worth after [`NodeWaits::delta`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeWaits {
    pub io_waits: u64,
    pub io_wait_ns: u64,
    pub fair_waits: u64,
    pub fair_wait_ns: u64,
    /// The placed tasks' wake-ups that went straight to an idle CPU, and their
    /// waits: the cost of an uncontended wake-up (included in `io_*` too).
    #[serde(default)]
    pub io_idle_waits: u64,
    #[serde(default)]
    pub io_idle_wait_ns: u64,
}

impl NodeWaits {
    /// Adds another copy's counts (one CPU's, when summing a per-CPU map).
    pub fn merge(&mut self, other: &NodeWaits) {
        self.io_waits += other.io_waits;
        self.io_wait_ns += other.io_wait_ns;
        self.fair_waits += other.fair_waits;
        self.fair_wait_ns += other.fair_wait_ns;
        self.io_idle_waits += other.io_idle_waits;
        self.io_idle_wait_ns += other.io_idle_wait_ns;
    }

    /// Saturating, like the counters: a reset never shows as a huge wait.
    pub fn delta(&self, before: &NodeWaits) -> NodeWaits {
        NodeWaits {
            io_waits: self.io_waits.saturating_sub(before.io_waits),
            io_wait_ns: self.io_wait_ns.saturating_sub(before.io_wait_ns),
            fair_waits: self.fair_waits.saturating_sub(before.fair_waits),
            fair_wait_ns: self.fair_wait_ns.saturating_sub(before.fair_wait_ns),
            io_idle_waits: self.io_idle_waits.saturating_sub(before.io_idle_waits),
            io_idle_wait_ns: self.io_idle_wait_ns.saturating_sub(before.io_idle_wait_ns),
        }
    }

    /// Mean wait of the placed I/O-bound tasks, in ns.
    pub fn io_mean_ns(&self) -> Option<f64> {
        (self.io_waits > 0).then(|| self.io_wait_ns as f64 / self.io_waits as f64)
    }

    /// Mean wait of the placed tasks' wake-ups that found an idle CPU, in ns.
    pub fn io_idle_mean_ns(&self) -> Option<f64> {
        (self.io_idle_waits > 0).then(|| self.io_idle_wait_ns as f64 / self.io_idle_waits as f64)
    }

    /// What the placed tasks' mean wait exceeds an uncontended wake-up's by, in
    /// ns: the part of the wait that crowding causes. A task spilled to another
    /// node waits for its wake-up too, so only the excess weighs against the
    /// NUMA penalty. In the 2-node VM, two placed tasks on two CPUs waited
    /// 100-220 µs on average, 99 % of their wake-ups went straight to an idle
    /// CPU, and that whole wait read as a contention of 1.2-1.35, the NUMA
    /// penalty's prior: the controller shed a task to measure it at every
    /// start. Without wake-ups that found an idle CPU, the whole mean (as
    /// before: contention is overstated, never hidden). Never below 0.
    pub fn io_contended_mean_ns(&self) -> Option<f64> {
        let all = self.io_mean_ns()?;
        let idle = self.io_idle_mean_ns().unwrap_or(0.0);
        Some((all - idle).max(0.0))
    }

    pub fn fair_mean_ns(&self) -> Option<f64> {
        (self.fair_waits > 0).then(|| self.fair_wait_ns as f64 / self.fair_waits as f64)
    }
}
