// SPDX-License-Identifier: GPL-2.0-only
//! The scheduler's event counters (`enum esn_stat` of bpf/intf.h): indexed
//! by [`Stat`], summed over CPUs by the binary, turned into per-interval
//! deltas here and printed for `--stats`.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::NodeLoad;
use esn_controller::NodeWaits;
use esn_stats::LatHist;

/// `enum esn_stat` and the names `--stats`, the JSON and `/metrics` give its
/// values, in the enum's order (a test checks it against bpf/intf.h).
macro_rules! stats {
    ($($variant:ident = $name:literal,)*) => {
        /// One counter of `enum esn_stat`: its value is the counter's index.
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Stat {
            $($variant,)*
        }

        /// Counter names in `enum esn_stat` order.
        pub const NAMES: [&str; [$($name,)*].len()] = [$($name,)*];

        impl Stat {
            /// Every counter, in the enum's order.
            pub const ALL: [Stat; NAMES.len()] = [$(Stat::$variant,)*];
        }
    };
}

stats! {
    PlaceLocal = "place_local",
    PlaceSpill = "place_spill",
    PlaceNone = "place_none",
    Release = "release",
    IoDirect = "io_direct",
    IoQueued = "io_queued",
    IoStolen = "io_stolen",
    FairDirect = "fair_direct",
    FairQueued = "fair_queued",
    FairStolen = "fair_stolen",
    Pinned = "pinned",
    IoScored = "io_scored",
    IoUnknownDev = "io_unknown_dev",
    ReturnHome = "return_home",
    IoPreempt = "io_preempt",
    RqStarted = "rq_started",
    RqCompleted = "rq_completed",
    RqUntracked = "rq_untracked",
    RqInflightFull = "rq_inflight_full",
    RqRequeued = "rq_requeued",
    Shed = "shed",
    IoRescue = "io_rescue",
    CpuReleased = "cpu_released",
    RqIssueKept = "rq_issue_kept",
    RqNoIssueTime = "rq_no_issue_time",
    RunNsIoprioRt = "run_ns_ioprio_rt",
    RunNsIoprioBe = "run_ns_ioprio_be",
    RunNsIoprioIdle = "run_ns_ioprio_idle",
    StarvedRun = "starved_run",
    QueueCountLow = "queue_count_low",
    LentSkipped = "lent_skipped",
    FairPreempt = "fair_preempt",
    KeptAsleep = "kept_asleep",
}

impl Stat {
    /// The name of the counter, as `--stats`, the JSON and `/metrics` spell it.
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// Its value in a reading keyed by name (the JSON form): 0 when the
    /// reading has none (an older scx_esn on the other end of `--monitor`).
    pub fn value_in(self, by_name: &BTreeMap<String, u64>) -> u64 {
        by_name.get(self.name()).copied().unwrap_or(0)
    }

    /// Its value in an array of counters.
    pub fn of(self, counters: &Counters) -> u64 {
        counters[self as usize]
    }
}

pub type Counters = [u64; NAMES.len()];

/// The sum of several counters of one interval.
pub fn sum_of(d: &Counters, stats: &[Stat]) -> u64 {
    stats.iter().map(|s| s.of(d)).sum()
}

/// One node's `struct esn_node_sched`, summed over CPUs, cumulative.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeSched {
    pub waits: NodeWaits,
    /// Every runnable-to-running wait by log2 slot (count and sum unused).
    pub wait_hist: LatHist,
    pub spill_in: u64,
    pub spill_out: u64,
    pub stolen_from: u64,
}

impl NodeSched {
    /// Adds another copy (one CPU's).
    pub fn merge(&mut self, v: &NodeSched) {
        self.waits.merge(&v.waits);
        for (sum, &n) in self
            .wait_hist
            .slots
            .iter_mut()
            .zip(v.wait_hist.slots.iter())
        {
            *sum += n;
        }
        self.spill_in += v.spill_in;
        self.spill_out += v.spill_out;
        self.stolen_from += v.stolen_from;
    }
}

/// Upper bound of the longest wait in `hist` (its highest non-empty slot),
/// in ns; `None` for an empty one. The last slot has no bound: its start is
/// the best that can be said.
pub fn longest_wait_ns(hist: &LatHist) -> Option<u64> {
    let slot = hist.slots.iter().rposition(|&n| n > 0)?;
    Some(
        esn_stats::hist::slot_upper_ns(slot)
            .unwrap_or_else(|| esn_stats::hist::slot_lower_ns(slot)),
    )
}

fn fmt_wait(mean_ns: Option<f64>) -> String {
    mean_ns.map_or_else(|| "-".to_string(), |ns| format!("{:.0}us", ns / 1000.0))
}

/// Events between two reads. Counters only grow, but a wrapped or reset
/// counter must not print as a huge number.
pub fn delta(now: &Counters, before: &Counters) -> Counters {
    let mut d = [0; NAMES.len()];
    for (i, slot) in d.iter_mut().enumerate() {
        *slot = now[i].saturating_sub(before[i]);
    }
    d
}

/// One `--stats` line: interval deltas, then per-node placed/threshold.
pub fn format_line(d: &Counters, nodes: &[NodeLoad]) -> String {
    let placed = sum_of(d, &[Stat::PlaceLocal, Stat::PlaceSpill]);
    // No placement in the interval: say so rather than "0 % local".
    let mut line = if placed == 0 {
        "place local=-".to_string()
    } else {
        let local = 100.0 * Stat::PlaceLocal.of(d) as f64 / placed as f64;
        format!("place local={local:.0}%")
    };
    for (name, value) in NAMES.iter().zip(d.iter()) {
        let _ = write!(line, " {name}={value}");
    }
    line.push_str(" | nodes");
    for n in nodes {
        let _ = write!(
            line,
            " n{}={}/{} wait io={} fair={}",
            n.node,
            n.placed,
            n.threshold,
            fmt_wait(n.waits.io_mean_ns()),
            fmt_wait(n.waits.fair_mean_ns())
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_never_underflows() {
        let mut now = [0; NAMES.len()];
        let mut before = [0; NAMES.len()];
        now[0] = 10;
        before[0] = 4;
        before[1] = 9;
        let d = delta(&now, &before);
        assert_eq!(d[0], 6);
        assert_eq!(d[1], 0);
    }

    #[test]
    fn line_shows_share_counters_and_nodes() {
        let mut d = [0; NAMES.len()];
        d[Stat::PlaceLocal as usize] = 3;
        d[Stat::PlaceSpill as usize] = 1;
        let nodes = [
            NodeLoad {
                node: 0,
                placed: 1,
                threshold: 2,
                waits: NodeWaits::default(),
                ..Default::default()
            },
            NodeLoad {
                node: 1,
                placed: 2,
                threshold: 2,
                waits: NodeWaits {
                    io_waits: 4,
                    io_wait_ns: 100_000,
                    fair_waits: 1,
                    fair_wait_ns: 3_000,
                    ..Default::default()
                },
                ..Default::default()
            },
        ];
        let line = format_line(&d, &nodes);
        assert!(line.starts_with("place local=75%"), "{line}");
        assert!(line.contains(" place_spill=1 "), "{line}");
        assert!(
            line.ends_with("| nodes n0=1/2 wait io=- fair=- n1=2/2 wait io=25us fair=3us"),
            "{line}"
        );
    }

    #[test]
    fn waits_delta_saturates() {
        let now = NodeWaits {
            io_waits: 10,
            io_wait_ns: 1_000,
            fair_waits: 1,
            fair_wait_ns: 5,
            ..Default::default()
        };
        let before = NodeWaits {
            io_waits: 4,
            io_wait_ns: 400,
            fair_waits: 3,
            fair_wait_ns: 9,
            ..Default::default()
        };
        let d = now.delta(&before);
        assert_eq!((d.io_waits, d.io_wait_ns), (6, 600));
        assert_eq!((d.fair_waits, d.fair_wait_ns), (0, 0));
        assert_eq!(d.io_mean_ns(), Some(100.0));
        assert_eq!(d.fair_mean_ns(), None);
    }

    #[test]
    fn longest_wait_is_the_top_slots_bound() {
        let mut h = LatHist::default();
        assert_eq!(longest_wait_ns(&h), None);
        h.record(3_000);
        h.record(1_500_000);
        assert_eq!(longest_wait_ns(&h), Some(1 << 21));
        h.record(u64::MAX);
        assert_eq!(longest_wait_ns(&h), Some(1 << 39));
    }

    #[test]
    fn node_sched_merges_cpus() {
        let mut cpu = NodeSched::default();
        cpu.waits.io_waits = 2;
        cpu.spill_in = 1;
        cpu.stolen_from = 4;
        cpu.wait_hist.slots[10] = 3;
        let mut sum = NodeSched::default();
        sum.merge(&cpu);
        sum.merge(&cpu);
        assert_eq!(sum.waits.io_waits, 4);
        assert_eq!((sum.spill_in, sum.spill_out, sum.stolen_from), (2, 0, 8));
        assert_eq!(sum.wait_hist.slots[10], 6);
    }

    #[test]
    fn interval_without_placements_shows_no_share() {
        let line = format_line(&[0; NAMES.len()], &[]);
        assert!(line.starts_with("place local=- "), "{line}");
    }

    /// Every name is its `ESN_STAT_*` value in lower case, in the enum's
    /// order: a counter added to intf.h without its name here, or a name out
    /// of place, fails this rather than print another counter's value.
    #[test]
    fn names_match_the_bpf_enum() {
        let intf = include_str!("../../../bpf/intf.h");
        let body = intf
            .split("enum esn_stat {")
            .nth(1)
            .and_then(|rest| rest.split("};").next())
            .expect("enum esn_stat in bpf/intf.h");
        let from_header: Vec<String> = body
            .lines()
            .filter_map(|l| l.trim().strip_prefix("ESN_STAT_"))
            .map(|l| {
                l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase()
            })
            .collect();
        assert_eq!(from_header, NAMES);
        assert_eq!(Stat::IoUnknownDev.name(), "io_unknown_dev");
        assert!(Stat::ALL.iter().enumerate().all(|(i, &s)| s as usize == i));
    }

    #[test]
    fn value_in_reads_by_the_enums_name() {
        let by_name = BTreeMap::from([("starved_run".to_string(), 3)]);
        assert_eq!(Stat::StarvedRun.value_in(&by_name), 3);
        assert_eq!(Stat::Shed.value_in(&by_name), 0);
    }
}
