// SPDX-License-Identifier: GPL-2.0-only
//! CPU energy during an interval, and what it bought: part of an observe
//! report ([`crate::Report::energy`]) and of the scheduler's interval
//! (`esn_reading::IntervalStats::energy`); `esn_power` measures it.
//!
//! Fields added after the first release carry `#[serde(default)]`, so a
//! reader of this version still reads an older scheduler's intervals.

use serde::{Deserialize, Serialize};

use crate::report::{LatKind, Report};

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
