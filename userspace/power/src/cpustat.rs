// SPDX-License-Identifier: GPL-2.0-only
//! CPU busy time per NUMA node, from /proc/stat: cumulative ticks read with
//! every stats reading, so an interval's busy % is a difference like every
//! other figure.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Ticks of one node's CPUs since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTicks {
    pub busy: u64,
    pub total: u64,
    /// CPUs whose ticks are summed (the node's online CPUs then).
    #[serde(default)]
    pub cpus: u32,
}

impl NodeTicks {
    /// Busy share of the ticks between `before` and `self`, 0-100; `None`
    /// when no tick passed (or the CPUs changed under us).
    pub fn busy_pct_since(&self, before: &NodeTicks) -> Option<f64> {
        let total = self.total.checked_sub(before.total)?;
        let busy = self.busy.checked_sub(before.busy)?;
        (total > 0).then(|| (100.0 * busy as f64 / total as f64).min(100.0))
    }
}

/// Per node id (`cpu_node[cpu]` gives a CPU's node), from /proc/stat's
/// `cpuN` lines. Idle and iowait count as not busy; guest time is already
/// inside user and nice, so it is not added again.
pub fn parse(proc_stat: &str, cpu_node: &[u8], nr_nodes: usize) -> Vec<NodeTicks> {
    let mut out = vec![NodeTicks::default(); nr_nodes];
    for line in proc_stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(cpu) = fields
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .and_then(|id| id.parse::<usize>().ok())
        else {
            continue;
        };
        let Some(node) = cpu_node.get(cpu).map(|&n| n as usize) else {
            continue;
        };
        let Some(slot) = out.get_mut(node) else {
            continue;
        };
        // user nice system idle iowait irq softirq steal [guest guest_nice]
        let v: Vec<u64> = fields.take(8).filter_map(|f| f.parse().ok()).collect();
        if v.len() < 4 {
            continue;
        }
        let idle = v[3] + v.get(4).copied().unwrap_or(0);
        let total: u64 = v.iter().sum();
        slot.total += total;
        slot.busy += total.saturating_sub(idle);
        slot.cpus += 1;
    }
    out
}

/// The machine's reading now; empty (no busy %) when /proc/stat is not
/// readable, which only loses that column.
pub fn read(cpu_node: &[u8], nr_nodes: usize) -> Vec<NodeTicks> {
    read_from(Path::new("/proc/stat"), cpu_node, nr_nodes)
}

/// [`read`] from another file (a fake /proc/stat in tests).
pub fn read_from(proc_stat: &Path, cpu_node: &[u8], nr_nodes: usize) -> Vec<NodeTicks> {
    std::fs::read_to_string(proc_stat)
        .map(|text| parse(&text, cpu_node, nr_nodes))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "\
cpu  400 0 100 1500 0 0 0 0 0 0
cpu0 100 0 50 800 50 0 0 0 0 0
cpu1 300 0 50 700 0 0 0 0 0 0
cpu3 10 0 10 80 0 0 0 0 0 0
intr 12345 1 2 3
ctxt 999
";

    #[test]
    fn sums_each_nodes_cpus_and_skips_the_rest() {
        // cpu2 is offline (no line); cpu3 belongs to node 1.
        let ticks = parse(STAT, &[0, 0, 1, 1], 2);
        assert_eq!(
            ticks[0],
            NodeTicks {
                busy: 500,
                total: 2050,
                cpus: 2
            }
        );
        assert_eq!(
            ticks[1],
            NodeTicks {
                busy: 20,
                total: 100,
                cpus: 1
            }
        );
    }

    #[test]
    fn busy_share_of_an_interval() {
        let a = NodeTicks {
            busy: 500,
            total: 1800,
            cpus: 2,
        };
        let b = NodeTicks {
            busy: 800,
            total: 2200,
            cpus: 2,
        };
        assert_eq!(b.busy_pct_since(&a), Some(75.0));
        assert_eq!(a.busy_pct_since(&a), None);
        assert_eq!(a.busy_pct_since(&b), None);
    }

    #[test]
    fn odd_input_is_no_panic() {
        let ticks = parse("cpu9 1 2\ncpux 1 2 3 4\ncpu0 1 1 1 1\n", &[5], 1);
        assert_eq!(ticks, vec![NodeTicks::default()]);
        assert_eq!(parse("", &[], 0), vec![]);
    }
}
