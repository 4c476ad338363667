// SPDX-License-Identifier: GPL-2.0-only
//! The scheduler's event counters: summed over CPUs, turned into per-interval
//! deltas and printed for `--stats`.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

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
    "bio_tracked",
    "bio_unknown_dev",
    "return_home",
    "io_preempt",
    "rq_started",
    "rq_completed",
    "rq_untracked",
    "rq_inflight_full",
    "rq_requeued",
    "shed",
];

pub type Counters = [u64; NAMES.len()];

/// Runnable-to-running waits on one node (struct esn_node_sched), summed
/// over CPUs: cumulative when read, an interval's worth after `delta`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeWaits {
    pub io_waits: u64,
    pub io_wait_ns: u64,
    pub fair_waits: u64,
    pub fair_wait_ns: u64,
}

impl NodeWaits {
    /// Saturating, like the counters: a reset never prints as a huge wait.
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

/// Per-node gauges read at the same moment as the counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeLoad {
    pub node: u32,
    pub placed: u32,
    pub threshold: u32,
    /// Waits during the interval.
    pub waits: NodeWaits,
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
    fn interval_without_placements_shows_no_share() {
        let line = format_line(&[0; NAMES.len()], &[]);
        assert!(line.starts_with("place local=- "), "{line}");
    }

    #[test]
    fn names_match_the_bpf_enum() {
        assert_eq!(
            NAMES[bpf_intf::esn_stat_ESN_STAT_BIO_UNKNOWN_DEV as usize],
            "bio_unknown_dev"
        );
        assert_eq!(
            NAMES[bpf_intf::esn_stat_ESN_STAT_IO_STOLEN as usize],
            "io_stolen"
        );
    }
}
