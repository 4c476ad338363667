//! One interval of a running scheduler, as `--stats --json` prints it, the
//! stats socket serves it and `scx_esn top` shows it.
//!
//! ```text
//!  IntervalStats ── counters   events by name (place_local, io_stolen, …)
//!               ├── nodes      per node with CPUs: placed/threshold, waits,
//!               │              CPU busy %, spills in/out, steals
//!               ├── control    the controller's last decision per learning node
//!               ├── health     dispatches, fallbacks, longest wait vs watchdog
//!               ├── energy     CPU energy per node (RAPL or the estimate),
//!               │              per I/O, and the throughput/(latency x energy)
//!               │              trade-off
//!               └── io         the block I/O report of `scx_esn observe`
//! ```
//!
//! Fields added after the first release carry `#[serde(default)]`, so a
//! reader of this version still reads an older scheduler's intervals.

use std::collections::BTreeMap;

use esn_controller::Decision;
use serde::{Deserialize, Serialize};

use crate::report::{LatKind, Report};

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
    /// CPU energy during the interval; `None` when it could not be measured
    /// nor estimated (no /proc/stat).
    #[serde(default)]
    pub energy: Option<EnergyStats>,
    /// The block I/O report, as `scx_esn observe` prints it.
    pub io: Report,
}

/// Where an energy figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnergySource {
    /// The processor's own counters (RAPL through powercap), per package.
    Rapl,
    /// The model: per-node busy and idle time weighed by per-state watts.
    Estimated,
}

impl EnergySource {
    pub fn as_str(&self) -> &'static str {
        match self {
            EnergySource::Rapl => "rapl",
            EnergySource::Estimated => "estimated",
        }
    }
}

/// One node's CPU energy during an interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NodeEnergy {
    pub node: u32,
    pub joules: f64,
    /// joules / the interval's length.
    pub watts: f64,
}

/// The CPUs' energy during an interval, and what it bought.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyStats {
    pub source: EnergySource,
    /// Per node with CPUs, by node id.
    pub nodes: Vec<NodeEnergy>,
    pub joules: f64,
    pub watts: f64,
    /// joules / completed block requests; `None` without any.
    pub joules_per_io: Option<f64>,
    /// The research's trade-off, throughput / (latency x energy): IOPS over
    /// (mean device latency in ms x mJ per I/O). Higher is better; `None`
    /// without I/O or latency samples.
    pub tradeoff: Option<f64>,
}

impl EnergyStats {
    /// "12.34 mJ", or "-" without I/O: as `--stats` and `top` print it.
    pub fn per_io_text(&self) -> String {
        self.joules_per_io
            .map_or("-".to_string(), |j| format!("{:.2} mJ", j * 1e3))
    }

    /// "3.333", or "-" without I/O or latency samples.
    pub fn tradeoff_text(&self) -> String {
        self.tradeoff.map_or("-".to_string(), |t| format!("{t:.3}"))
    }

    /// "energy (estimated): node 0 54.5 W, node 1 40.4 W; total 94.9 W
    /// (94.9 J), 12.30 mJ per I/O, trade-off 0.640": the source first, so an
    /// estimate is never read as a measurement.
    pub fn line(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("node {} {:.1} W", n.node, n.watts))
            .collect();
        format!(
            "energy ({}): {}; total {:.1} W ({:.1} J), {} per I/O, trade-off {}",
            self.source.as_str(),
            nodes.join(", "),
            self.watts,
            self.joules,
            self.per_io_text(),
            self.tradeoff_text()
        )
    }

    /// `scx_esn energy`'s line for a window of @elapsed_s: "energy
    /// (estimated) over 3.0 s: node 0 287.4 J (95.0 W); total 287.4 J
    /// (95.0 W)". Nothing of what it bought: the meter alone saw no I/O.
    pub fn window_line(&self, elapsed_s: f64) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("node {} {:.1} J ({:.1} W)", n.node, n.joules, n.watts))
            .collect();
        format!(
            "energy ({}) over {elapsed_s:.1} s: {}; total {:.1} J ({:.1} W)",
            self.source.as_str(),
            nodes.join(", "),
            self.joules,
            self.watts
        )
    }

    /// `scx_esn energy --json`: the fields with `elapsed_s`, without the
    /// per-I/O ones (for a reader who knows the I/O done).
    pub fn window_json(&self, elapsed_s: f64) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(fields) = value.as_object_mut() {
            fields.insert("elapsed_s".to_string(), serde_json::json!(elapsed_s));
            fields.remove("joules_per_io");
            fields.remove("tradeoff");
        }
        value
    }

    /// Adds what the interval's I/O report says the energy bought.
    pub fn with_io(mut self, io: &Report) -> EnergyStats {
        let reqs: u64 = io.devices.iter().map(|d| d.reqs).sum();
        self.joules_per_io = (reqs > 0).then(|| self.joules / reqs as f64);
        let (count, sum_us) = io
            .devices
            .iter()
            .flat_map(|d| &d.latency)
            .filter(|l| l.kind == LatKind::Device)
            .filter_map(|l| l.mean_us.map(|m| (l.count, m * l.count as f64)))
            .fold((0u64, 0.0), |(c, s), (n, t)| (c + n, s + t));
        let mean_ms = (count > 0).then(|| sum_us / count as f64 / 1000.0);
        self.tradeoff = match (mean_ms, self.joules_per_io) {
            (Some(ms), Some(j)) if io.elapsed_s > 0.0 && ms > 0.0 && j > 0.0 => {
                Some(reqs as f64 / io.elapsed_s / (ms * j * 1000.0))
            }
            _ => None,
        };
        self
    }
}
