// SPDX-License-Identifier: GPL-2.0-only
//! The scheduler's event counters: summed over CPUs, turned into per-interval
//! deltas and printed for `--stats`.

use std::fmt::Write;

use crate::bpf_intf;

/// Counter names in `enum esn_stat` order (bpf/intf.h).
pub const NAMES: [&str; bpf_intf::esn_stat_ESN_NR_STATS as usize] = [
    "place_local",
    "place_spill",
    "place_none",
    "release",
    "io_direct",
    "io_queued",
    "io_stolen",
    "fair_direct",
    "fair_queued",
    "fair_stolen",
    "pinned",
    "io_scored",
    "io_unknown_dev",
    "return_home",
    "io_preempt",
    "rq_started",
    "rq_completed",
    "rq_untracked",
    "rq_inflight_full",
    "rq_requeued",
    "shed",
    "io_rescue",
    "cpu_released",
    "rq_issue_kept",
    "rq_no_issue_time",
    "run_ns_ioprio_rt",
    "run_ns_ioprio_be",
    "run_ns_ioprio_idle",
    "starved_run",
];

pub type Counters = [u64; NAMES.len()];

pub use esn_stats::live::{NodeLoad, NodeWaits};
use esn_stats::LatHist;

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
    /// Adds one CPU's copy.
    pub fn add(&mut self, v: &bpf_intf::esn_node_sched) {
        self.waits.io_waits += v.io_waits;
        self.waits.io_wait_ns += v.io_wait_ns;
        self.waits.fair_waits += v.fair_waits;
        self.waits.fair_wait_ns += v.fair_wait_ns;
        for (sum, &n) in self.wait_hist.slots.iter_mut().zip(v.wait_slots.iter()) {
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

/// Sum of per-CPU values of one counter, as read from the per-CPU map.
pub fn sum_percpu(values: &[Vec<u8>]) -> u64 {
    values
        .iter()
        .filter_map(|v| v.get(..8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .fold(0u64, u64::wrapping_add)
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
    let placed = d[bpf_intf::esn_stat_ESN_STAT_PLACE_LOCAL as usize]
        + d[bpf_intf::esn_stat_ESN_STAT_PLACE_SPILL as usize];
    // No placement in the interval: say so rather than "0 % local".
    let mut line = if placed == 0 {
        "place local=-".to_string()
    } else {
        let local =
            100.0 * d[bpf_intf::esn_stat_ESN_STAT_PLACE_LOCAL as usize] as f64 / placed as f64;
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
    fn sums_cpus_and_ignores_short_values() {
        let vals = vec![
            5u64.to_ne_bytes().to_vec(),
            7u64.to_ne_bytes().to_vec(),
            vec![1, 2],
        ];
        assert_eq!(sum_percpu(&vals), 12);
    }

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
        d[bpf_intf::esn_stat_ESN_STAT_PLACE_LOCAL as usize] = 3;
        d[bpf_intf::esn_stat_ESN_STAT_PLACE_SPILL as usize] = 1;
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
        };
        let before = NodeWaits {
            io_waits: 4,
            io_wait_ns: 400,
            fair_waits: 3,
            fair_wait_ns: 9,
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
    fn node_sched_adds_cpus() {
        // A POD filled the way the map's bytes would be.
        let mut cpu: bpf_intf::esn_node_sched = unsafe { std::mem::zeroed() };
        cpu.io_waits = 2;
        cpu.spill_in = 1;
        cpu.stolen_from = 4;
        cpu.wait_slots[10] = 3;
        let mut sum = NodeSched::default();
        sum.add(&cpu);
        sum.add(&cpu);
        assert_eq!(sum.waits.io_waits, 4);
        assert_eq!((sum.spill_in, sum.spill_out, sum.stolen_from), (2, 0, 8));
        assert_eq!(sum.wait_hist.slots[10], 6);
    }

    #[test]
    fn interval_without_placements_shows_no_share() {
        let line = format_line(&[0; NAMES.len()], &[]);
        assert!(line.starts_with("place local=- "), "{line}");
    }

    #[test]
    fn names_match_the_bpf_enum() {
        assert_eq!(
            NAMES[bpf_intf::esn_stat_ESN_STAT_IO_UNKNOWN_DEV as usize],
            "io_unknown_dev"
        );
        assert_eq!(
            NAMES[bpf_intf::esn_stat_ESN_STAT_IO_STOLEN as usize],
            "io_stolen"
        );
    }
}
