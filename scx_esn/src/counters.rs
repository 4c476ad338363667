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
    "bio_tracked",
    "bio_unknown_dev",
    "return_home",
    "io_preempt",
    "rq_started",
    "rq_completed",
    "rq_untracked",
    "rq_inflight_full",
    "rq_requeued",
];

pub type Counters = [u64; NAMES.len()];

/// Per-node gauges read at the same moment as the counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLoad {
    pub node: u32,
    pub placed: u32,
    pub threshold: u32,
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
        let _ = write!(line, " n{}={}/{}", n.node, n.placed, n.threshold);
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
            },
            NodeLoad {
                node: 1,
                placed: 2,
                threshold: 2,
            },
        ];
        let line = format_line(&d, &nodes);
        assert!(line.starts_with("place local=75%"), "{line}");
        assert!(line.contains(" place_spill=1 "), "{line}");
        assert!(line.ends_with("| nodes n0=1/2 n1=2/2"), "{line}");
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
