// SPDX-License-Identifier: GPL-2.0-only
//! A cumulative reading of the scheduler and the interval between two:
//!
//! ```text
//!  Cumulative (counted since start) ─┐
//!  Cumulative (counted since start) ─┴► interval() ─► IntervalStats
//!                                          ├─► render(): the --stats text
//!                                          └─► serde: --stats --json, the
//!                                              stats socket, --monitor
//! ```
//!
//! Only cumulative readings cross the binary's channels; every interval is a
//! difference of two of them, made by whoever asked, so no reader disturbs
//! another.
//!
//! The interval, as `--stats --json` prints it, the stats socket serves it
//! and `scx_esn top` shows it:
//!
//! ```text
//!  IntervalStats ── counters   events by name (place_local, io_stolen, …)
//!               ├── nodes      NodeLoad per node with CPUs: placed/threshold,
//!               │              NodeWaits, CPU busy %, spills in/out, steals
//!               ├── control    the controller's last decision per learning node
//!               ├── health     dispatches, fallbacks, longest wait vs watchdog
//!               ├── energy     CPU energy per node (RAPL or the estimate),
//!               │              per I/O, and the throughput/(latency x energy)
//!               │              trade-off (esn_stats::energy)
//!               └── io         the block I/O report of `scx_esn observe`
//! ```
//!
//! Its fields are described for scx_stats in `schema.rs`. Fields added after
//! the first release carry `#[serde(default)]`, so a reader of this version
//! still reads an older scheduler's intervals.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use esn_controller::{Decision, NodeWaits};
use esn_power::cpustat::NodeTicks;
use esn_stats::energy::EnergyStats;
use esn_stats::report::Report;
use esn_stats::report::{build_report, render_text, ReportKind, ReportOptions};
use esn_stats::snapshot::RawSnapshot;
use esn_stats::LatHist;
use esn_topology::devt::DeviceTable;
use serde::{Deserialize, Serialize};

use crate::counters::{self, Counters, NodeSched, Stat};

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

/// Everything the scheduler has counted since it started, at one moment.
#[derive(Clone, Debug)]
pub struct Cumulative {
    pub counters: Counters,
    /// Waits, spills and steals, indexed by node.
    pub sched: Vec<NodeSched>,
    /// CPU ticks since boot, indexed by node.
    pub cpu: Vec<NodeTicks>,
    /// The CPUs' energy since the scheduler started.
    pub energy: Option<esn_power::energy::Reading>,
    pub watchdog_timeout_ms: u64,
    pub io: RawSnapshot,
    /// Gauges at that moment, one per node with CPUs.
    pub nodes: Vec<NodeGauge>,
    /// The controller's last decisions (empty with --threshold).
    pub decisions: Vec<Decision>,
}

// By hand: the standard library derives Default for arrays of at most 32,
// and there are more counters than that.
impl Default for Cumulative {
    fn default() -> Self {
        Cumulative {
            counters: [0; counters::NAMES.len()],
            sched: Vec::new(),
            cpu: Vec::new(),
            energy: None,
            watchdog_timeout_ms: 0,
            io: RawSnapshot::default(),
            nodes: Vec::new(),
            decisions: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeGauge {
    pub node: u32,
    pub cpus: u32,
    pub placed: u32,
    pub threshold: u32,
}

/// A reading and the one taken when the scheduler started, so that a new
/// reader's first interval covers the whole run instead of nothing.
#[derive(Clone, Debug)]
pub struct Reading {
    pub start: Arc<Cumulative>,
    pub now: Arc<Cumulative>,
}

/// What happened between two readings.
pub fn interval(before: &Cumulative, now: &Cumulative, devices: &DeviceTable) -> IntervalStats {
    let deltas = counters::delta(&now.counters, &before.counters);
    let empty = NodeSched::default();
    let mut all_waits = LatHist::default();
    let nodes = now
        .nodes
        .iter()
        .map(|g| {
            let idx = g.node as usize;
            let n = now.sched.get(idx).unwrap_or(&empty);
            let b = before.sched.get(idx).unwrap_or(&empty);
            let waits = n.wait_hist.delta(&b.wait_hist);
            for (sum, w) in all_waits.slots.iter_mut().zip(waits.slots) {
                *sum += w;
            }
            NodeLoad {
                node: g.node,
                placed: g.placed,
                threshold: g.threshold,
                waits: n.waits.delta(&b.waits),
                cpus: g.cpus,
                busy_pct: match (now.cpu.get(idx), before.cpu.get(idx)) {
                    (Some(n), Some(b)) => n.busy_pct_since(b),
                    _ => None,
                },
                spill_in: n.spill_in.saturating_sub(b.spill_in),
                spill_out: n.spill_out.saturating_sub(b.spill_out),
                stolen_from: n.stolen_from.saturating_sub(b.stolen_from),
            }
        })
        .collect();
    let health = Health {
        dispatched: counters::sum_of(
            &deltas,
            &[
                Stat::IoDirect,
                Stat::IoQueued,
                Stat::IoStolen,
                Stat::FairDirect,
                Stat::FairQueued,
                Stat::FairStolen,
                Stat::StarvedRun,
            ],
        ),
        fallbacks: Stat::PlaceNone.of(&deltas),
        max_wait_ns: counters::longest_wait_ns(&all_waits),
        watchdog_timeout_ms: now.watchdog_timeout_ms,
    };
    let io = build_report(
        &before.io,
        &now.io,
        devices,
        &ReportOptions {
            device_filter: Vec::new(),
            top_tasks: 5,
            kind: ReportKind::Interval,
        },
    );
    let energy = match (&before.energy, &now.energy) {
        (Some(b), Some(n)) => esn_power::energy::interval(b, n).map(|e| e.with_io(&io)),
        _ => None,
    };
    IntervalStats {
        counters: counters::NAMES
            .iter()
            .zip(deltas)
            .map(|(name, v)| (name.to_string(), v))
            .collect(),
        nodes,
        control: now.decisions.clone(),
        health,
        energy,
        io,
    }
}

/// The text form: the counters line, the block I/O tables, the control lines.
pub fn render(s: &IntervalStats) -> String {
    let mut values: Counters = [0; counters::NAMES.len()];
    for (stat, slot) in Stat::ALL.iter().zip(values.iter_mut()) {
        *slot = stat.value_in(&s.counters);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", counters::format_line(&values, &s.nodes));
    for n in &s.nodes {
        let _ = writeln!(
            out,
            "node {}: {} CPUs busy {} | placed {}/{} | spills in {} out {} | stolen {}",
            n.node,
            n.cpus,
            n.busy_pct.map_or("-".to_string(), |b| format!("{b:.0}%")),
            n.placed,
            n.threshold,
            n.spill_in,
            n.spill_out,
            n.stolen_from
        );
    }
    let h = &s.health;
    let _ = writeln!(
        out,
        "health: {} dispatched, {} fallbacks, longest wait {} of the {} s watchdog ({} left)",
        h.dispatched,
        h.fallbacks,
        h.max_wait_ns.map_or("-".to_string(), fmt_wait_bound),
        h.watchdog_timeout_ms / 1000,
        h.watchdog_margin_pct()
            .map_or("-".to_string(), |m| format!("{m:.1}%"))
    );
    let class_ms = |stat: Stat| stat.of(&values) as f64 / 1e6;
    let (rt, idle) = (
        class_ms(Stat::RunNsIoprioRt),
        class_ms(Stat::RunNsIoprioIdle),
    );
    // Only where a class other than best effort ran: the usual case says
    // nothing new.
    if rt > 0.0 || idle > 0.0 {
        let _ = writeln!(
            out,
            "I/O priority classes, CPU time: rt {rt:.1} ms, be {:.1} ms, idle {idle:.1} ms",
            class_ms(Stat::RunNsIoprioBe)
        );
    }
    if let Some(e) = &s.energy {
        let _ = writeln!(out, "{}", e.line());
    }
    out.push_str(&render_text(&s.io));
    let thresholds: Vec<u32> = {
        let len = s
            .nodes
            .iter()
            .map(|n| n.node as usize + 1)
            .max()
            .unwrap_or(0);
        let mut t = vec![0; len];
        for n in &s.nodes {
            t[n.node as usize] = n.threshold;
        }
        t
    };
    out.push_str(&esn_controller::decisions_text(&s.control, &thresholds));
    out
}

/// A wait's upper bound in the unit that keeps it readable.
fn fmt_wait_bound(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("<= {} us", ns / 1000)
    } else {
        format!("<= {:.1} ms", ns as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use esn_stats::snapshot::{IoCounters, IoKey, Locality, Op};
    use esn_topology::devt::DevT;
    use std::time::Duration;

    fn reading(placed: u32, reqs: u64, at_ns: u64) -> Cumulative {
        let mut c = Cumulative::default();
        c.counters[0] = reqs;
        let mut waits = LatHist::default();
        waits.slots[12] = reqs;
        c.sched = vec![
            NodeSched::default(),
            NodeSched {
                waits: NodeWaits {
                    io_waits: reqs,
                    io_wait_ns: reqs * 1000,
                    ..Default::default()
                },
                wait_hist: waits,
                spill_in: reqs / 10,
                ..Default::default()
            },
        ];
        c.cpu = vec![
            NodeTicks::default(),
            NodeTicks {
                busy: reqs,
                total: 4 * reqs,
                cpus: 2,
            },
        ];
        // Joules since start: node 0 1 J per request, node 1 2 J.
        c.energy = Some(fixtures::energy(
            Duration::from_nanos(at_ns),
            [reqs as f64, 2.0 * reqs as f64],
        ));
        c.watchdog_timeout_ms = 30_000;
        c.nodes = fixtures::gauges(placed, 1);
        let mut device = LatHist::default();
        for _ in 0..reqs {
            device.record(100_000);
        }
        c.io.at_ns = at_ns;
        c.io.io.insert(
            IoKey {
                dev: DevT::new(259, 0),
                locality: Locality::Local,
                op: Op::Read,
            },
            IoCounters {
                reqs,
                bytes: reqs * 4096,
                device,
                ..Default::default()
            },
        );
        c
    }

    fn devices() -> DeviceTable {
        fixtures::devices(false)
    }

    #[test]
    fn an_interval_is_the_difference_of_two_readings() {
        let a = reading(1, 100, 1_000_000_000);
        let b = reading(1, 1100, 2_000_000_000);
        let s = interval(&a, &b, &devices());
        assert_eq!(s.counters[counters::NAMES[0]], 1000);
        assert_eq!(s.nodes[1].waits.io_waits, 1000);
        assert_eq!(s.nodes[1].spill_in, 100);
        assert_eq!(s.nodes[1].busy_pct, Some(25.0));
        assert_eq!(s.nodes[0].busy_pct, None);
        assert_eq!(s.health.max_wait_ns, Some(8192));
        assert_eq!(s.health.watchdog_timeout_ms, 30_000);
        assert!(s.health.watchdog_margin_pct().unwrap() > 99.9);
        assert_eq!(s.nodes[1].threshold, 1);
        let text = render(&s);
        assert!(text.contains("n1=1/1 wait io=1us"), "{text}");
        assert!(
            text.contains("node 1: 2 CPUs busy 25% | placed 1/1 | spills in 100 out 0 | stolen 0"),
            "{text}"
        );
        assert!(
            text.contains("health: 0 dispatched, 0 fallbacks, longest wait <= 8 us of the 30 s watchdog (100.0% left)"),
            "{text}"
        );
        assert!(text.contains("nvme0n1"), "{text}");
        // 3000 J in 1 s over 1000 requests of 100 us: 3 J per I/O, and
        // 1000 IOPS / (0.1 ms x 3000 mJ) = 3.333.
        let e = s.energy.as_ref().unwrap();
        assert_eq!(e.joules, 3000.0);
        assert_eq!(e.joules_per_io, Some(3.0));
        assert!(
            text.contains(
                "energy (estimated): node 0 1000.0 W, node 1 2000.0 W; total 3000.0 W \
                 (3000.0 J), 3000.00 mJ per I/O, trade-off 3.333"
            ),
            "{text}"
        );
        // The JSON form reads back as it was written (what --monitor gets).
        let back: IntervalStats =
            serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn an_empty_first_reading_is_no_panic() {
        let s = interval(&Cumulative::default(), &reading(0, 0, 5), &devices());
        assert!(s.counters.values().all(|&v| v == 0));
        let _ = render(&s);
    }
}
