//! One interval of a running scheduler, as `--stats --json` prints it, the
//! stats socket serves it and `scx_esn top` shows it.
//!
//! ```text
//!  IntervalStats ── counters   events by name (place_local, io_stolen, …)
//!               ├── nodes      per node with CPUs: placed/threshold, waits,
//!               │              CPU busy %, spills in/out, steals
//!               ├── control    the controller's last decision per learning node
//!               ├── health     dispatches, fallbacks, longest wait vs watchdog
//!               └── io         the block I/O report of `scx_esn observe`
//! ```
//!
//! Fields added after the first release carry `#[serde(default)]`, so a
//! reader of this version still reads an older scheduler's intervals.

use std::collections::BTreeMap;

use esn_controller::Decision;
use serde::{Deserialize, Serialize};

use crate::report::Report;

/// Runnable-to-running waits on one node, summed over CPUs: cumulative when
/// read, an interval's worth after [`NodeWaits::delta`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeWaits {
    pub io_waits: u64,
    pub io_wait_ns: u64,
    pub fair_waits: u64,
    pub fair_wait_ns: u64,
}

impl NodeWaits {
    /// Saturating, like the counters: a reset never shows as a huge wait.
    pub fn delta(&self, before: &NodeWaits) -> NodeWaits {
        NodeWaits {
            io_waits: self.io_waits.saturating_sub(before.io_waits),
            io_wait_ns: self.io_wait_ns.saturating_sub(before.io_wait_ns),
            fair_waits: self.fair_waits.saturating_sub(before.fair_waits),
            fair_wait_ns: self.fair_wait_ns.saturating_sub(before.fair_wait_ns),
        }
    }

    /// Mean wait of the placed I/O-bound tasks, in ns.
    pub fn io_mean_ns(&self) -> Option<f64> {
        (self.io_waits > 0).then(|| self.io_wait_ns as f64 / self.io_waits as f64)
    }

    pub fn fair_mean_ns(&self) -> Option<f64> {
        (self.fair_waits > 0).then(|| self.fair_wait_ns as f64 / self.fair_waits as f64)
    }
}

/// One node with CPUs during an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeLoad {
    pub node: u32,
    /// I/O-bound tasks placed on the node at the end of the interval.
    pub placed: u32,
    /// Most it keeps before spilling, at the end of the interval.
    pub threshold: u32,
    /// Waits during the interval.
    pub waits: NodeWaits,
    /// Online CPUs of the node.
    #[serde(default)]
    pub cpus: u32,
    /// Share of the node's CPU time not idle during the interval, 0-100.
    #[serde(default)]
    pub busy_pct: Option<f64>,
    /// Placements onto this node of tasks whose home is another node.
    #[serde(default)]
    pub spill_in: u64,
    /// Placements elsewhere of tasks whose home is this node.
    #[serde(default)]
    pub spill_out: u64,
    /// Placed I/O tasks of this node's queue that another node's CPU ran.
    #[serde(default)]
    pub stolen_from: u64,
}

/// Is the scheduler keeping up? The kernel's watchdog unloads a sched_ext
/// scheduler that leaves a runnable task unrun for its timeout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// Tasks handed to a CPU during the interval (direct, queued, stolen).
    pub dispatched: u64,
    /// Placement attempts that found no node with room: the task was
    /// scheduled like any other.
    pub fallbacks: u64,
    /// Upper bound of the longest runnable-to-running wait seen during the
    /// interval, in ns (log2 resolution); `None` without any wait.
    pub max_wait_ns: Option<u64>,
    /// The watchdog's timeout, in ms.
    pub watchdog_timeout_ms: u64,
}

impl Health {
    /// How much of the watchdog's timeout the longest wait left, 0-100:
    /// 100 is no wait at all, 0 means a task waited as long as the watchdog
    /// tolerates.
    pub fn watchdog_margin_pct(&self) -> Option<f64> {
        if self.watchdog_timeout_ms == 0 {
            return None;
        }
        let timeout_ns = self.watchdog_timeout_ms as f64 * 1e6;
        let wait = self.max_wait_ns.unwrap_or(0) as f64;
        Some((100.0 * (1.0 - wait / timeout_ns)).clamp(0.0, 100.0))
    }
}

/// One interval: the `--stats --json` and `--monitor --json` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalStats {
    /// Events during the interval, by counter name.
    pub counters: BTreeMap<String, u64>,
    /// Per node with CPUs.
    pub nodes: Vec<NodeLoad>,
    /// Per node under the controller: its last decision (empty with a
    /// pinned --threshold).
    pub control: Vec<Decision>,
    #[serde(default)]
    pub health: Health,
    /// The block I/O report, as `scx_esn observe` prints it.
    pub io: Report,
}
