// SPDX-License-Identifier: GPL-2.0-only
//! Reading blkobs.bpf.h's maps into an `esn_stats::RawSnapshot`
//! (`BlkObsMaps::snapshot`; per-CPU maps summed here) and dropping requests
//! that never completed (`BlkObsMaps::age_inflight`).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use esn_reading::Stat;
use esn_stats::hist::{LatHist, LAT_SLOTS};
use esn_stats::snapshot::{
    comm_from_bytes, BpfCost, IoCounters, IoKey, NodeIo, RawSnapshot, TaskIo,
};
use esn_topology::devt::DevT;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf_intf;

/// A request in flight longer than this lost its completion (or was freed
/// without one) and is dropped from the table. Far above any real I/O
/// latency, including SCSI/NVMe timeouts with their retries.
pub const INFLIGHT_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(120);

/// The maps blkobs.bpf.h defines, borrowed from either skeleton.
pub struct BlkObsMaps<'a> {
    /// The half-life BPF decays the I/O score with (its rodata).
    pub io_half_life_ns: u64,
    pub inflight: &'a dyn MapCore,
    pub io_hists: &'a dyn MapCore,
    /// Disk -> home node, as registered: the locality of io_hists' entries.
    pub dev_home_node: &'a dyn MapCore,
    pub node_io: &'a dyn MapCore,
    pub task_io: &'a dyn MapCore,
    pub stats: &'a dyn MapCore,
}

/// A plain C value of a map, copied out of its bytes; a size mismatch (an
/// intf.h change without a rebuild) fails loudly instead of misreading.
pub fn read_pod<T: Copy>(bytes: &[u8]) -> Result<T> {
    anyhow::ensure!(
        bytes.len() == std::mem::size_of::<T>(),
        "BPF map value of {} bytes, expected {}",
        bytes.len(),
        std::mem::size_of::<T>()
    );
    // SAFETY: T is a bindgen-generated C struct of integers (every bit
    // pattern valid) and bytes holds exactly size_of::<T>() bytes.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

/// Has a request been in flight for longer than @max_age_ns? Its age counts
/// from its latest event (start, or issue after a requeue); a timestamp from
/// the future (read racing an update) is not stale.
pub fn is_stale(start_ns: u64, issue_ns: u64, now: u64, max_age_ns: u64) -> bool {
    now.saturating_sub(start_ns.max(issue_ns)) > max_age_ns
}

/// The I/O score as BPF's io_score_now() would compute it at @now: the
/// stored value is only decayed when the task does I/O.
pub fn decayed_score(score: u64, decayed_at: u64, now: u64, half_life_ns: u64) -> u64 {
    if half_life_ns == 0 || now <= decayed_at {
        return score;
    }
    let halvings = (now - decayed_at) / half_life_ns;
    if halvings >= 64 {
        0
    } else {
        score >> halvings
    }
}

fn lat_hist(slots: &[u64], count: u64, sum_ns: u64) -> LatHist {
    let mut h = LatHist {
        count,
        sum_ns,
        ..Default::default()
    };
    for (dst, src) in h.slots.iter_mut().zip(slots.iter().take(LAT_SLOTS)) {
        *dst = *src;
    }
    h
}

/// One CPU's histogram entry as counters.
fn io_counters_of(v: &bpf_intf::esn_io_hist) -> IoCounters {
    let q = bpf_intf::esn_lat_kind_ESN_LAT_QUEUE as usize;
    let d = bpf_intf::esn_lat_kind_ESN_LAT_DEVICE as usize;
    IoCounters {
        reqs: v.reqs,
        bytes: v.bytes,
        cross_completions: v.cross_completions,
        queue: lat_hist(&v.slots[q], v.lat_cnt[q], v.lat_sum_ns[q]),
        device: lat_hist(&v.slots[d], v.lat_cnt[d], v.lat_sum_ns[d]),
    }
}

/// Sum of per-CPU values of one counter, as read from the per-CPU map.
pub fn sum_percpu(values: &[Vec<u8>]) -> u64 {
    values
        .iter()
        .filter_map(|v| v.get(..8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .fold(0u64, u64::wrapping_add)
}

/// CLOCK_MONOTONIC in ns: the clock bpf_ktime_get_ns() reads.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl BlkObsMaps<'_> {
    /// One `enum esn_stat` counter, summed over CPUs.
    pub fn stat(&self, stat: Stat) -> Result<u64> {
        let values = self
            .stats
            .lookup_percpu(&(stat as u32).to_ne_bytes(), MapFlags::ANY)
            .context("reading the stats map")?
            .unwrap_or_default();
        Ok(sum_percpu(&values))
    }

    /// Disk (dev_t) -> home node, as BPF judges locality by.
    fn dev_homes(&self) -> Result<BTreeMap<u32, u8>> {
        let mut homes = BTreeMap::new();
        for key in self.dev_home_node.keys() {
            if let Some(home) = self.dev_home_node.lookup(&key, MapFlags::ANY)? {
                homes.insert(read_pod::<u32>(&key)?, read_pod::<u8>(&home)?);
            }
        }
        Ok(homes)
    }

    /// The per-(device, locality, op) counters alone: what the controller
    /// reads every interval, without walking the task table. BPF keeps them
    /// per submitting node and per CPU; the CPUs add up and the nodes fold
    /// into local, remote and unknown here.
    pub fn io_counters(&self) -> Result<BTreeMap<IoKey, IoCounters>> {
        let homes = self.dev_homes()?;
        let mut io: BTreeMap<IoKey, IoCounters> = BTreeMap::new();
        for key in self.io_hists.keys() {
            let Some(per_cpu) = self.io_hists.lookup_percpu(&key, MapFlags::ANY)? else {
                continue; // deleted between keys() and lookup()
            };
            let k: bpf_intf::esn_io_key = read_pod(&key)?;
            let home = homes.get(&k.dev).copied();
            let Some(io_key) = IoKey::from_raw(k.dev, home, k.submit_node, k.op) else {
                continue;
            };
            let sum = io.entry(io_key).or_default();
            for value in &per_cpu {
                sum.merge(&io_counters_of(&read_pod(value)?));
            }
        }
        Ok(io)
    }

    /// One consistent-enough read of every table (each map is read once;
    /// counters only grow, so deltas between reads stay meaningful).
    pub fn snapshot(&self, nr_nodes: u32, cost: BpfCost, aged_out: u64) -> Result<RawSnapshot> {
        let mut snap = RawSnapshot {
            at_ns: monotonic_ns(),
            cost,
            aged_out,
            ..Default::default()
        };

        snap.io = self.io_counters()?;

        for node in 0..nr_nodes {
            let Some(per_cpu) = self
                .node_io
                .lookup_percpu(&node.to_ne_bytes(), MapFlags::ANY)?
            else {
                continue;
            };
            let mut sum = NodeIo::default();
            for value in &per_cpu {
                let v: bpf_intf::esn_node_io = read_pod(value)?;
                sum.reqs += v.reqs;
                sum.bytes += v.bytes;
                sum.remote_reqs += v.remote_reqs;
                sum.remote_bytes += v.remote_bytes;
                sum.completions += v.completions;
                sum.cross_completions += v.cross_completions;
            }
            snap.nodes.insert(node, sum);
        }

        for key in self.task_io.keys() {
            let Some(value) = self.task_io.lookup(&key, MapFlags::ANY)? else {
                continue;
            };
            let tid = u32::from_ne_bytes(key[..4].try_into().context("task_io key")?);
            let v: bpf_intf::esn_task_io = read_pod(&value)?;
            let comm: Vec<u8> = v.comm.iter().map(|&c| c as u8).collect();
            snap.tasks.insert(
                tid,
                TaskIo {
                    tid,
                    tgid: v.tgid,
                    comm: comm_from_bytes(&comm),
                    reqs: v.reqs,
                    bytes: v.bytes,
                    remote_reqs: v.remote_reqs,
                    last_node: (v.reqs > 0 && v.last_node as u32 != bpf_intf::ESN_NO_NODE)
                        .then_some(v.last_node as u32),
                    dominant_dev: (v.vote_weight > 0).then_some(DevT(v.vote_dev)),
                    io_score: decayed_score(
                        v.score,
                        v.decayed_at,
                        snap.at_ns,
                        self.io_half_life_ns,
                    ),
                },
            );
        }

        snap.started = self.stat(Stat::RqStarted)?;
        snap.completed = self.stat(Stat::RqCompleted)?;
        snap.untracked = self.stat(Stat::RqUntracked)?;
        snap.inflight_full = self.stat(Stat::RqInflightFull)?;
        Ok(snap)
    }

    /// Delete requests in flight for longer than @max_age_ns: their
    /// completion was missed (attached mid-flight, a lost event, a request
    /// freed without completing). Returns how many were dropped.
    pub fn age_inflight(&self, max_age_ns: u64) -> Result<u64> {
        let now = monotonic_ns();
        let mut stale = Vec::new();
        for key in self.inflight.keys() {
            let Some(value) = self.inflight.lookup(&key, MapFlags::ANY)? else {
                continue;
            };
            // struct blkobs_rq starts with start_ns, issue_ns.
            let start = u64::from_ne_bytes(value[0..8].try_into().context("inflight value")?);
            let issue = u64::from_ne_bytes(value[8..16].try_into().context("inflight value")?);
            if is_stale(start, issue, now, max_age_ns) {
                stale.push(key);
            }
        }
        let mut dropped = 0;
        for key in stale {
            // Already completed meanwhile: nothing to drop.
            if self.inflight.delete(&key).is_ok() {
                dropped += 1;
            }
        }
        Ok(dropped)
    }
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
    fn staleness_counts_from_the_latest_event() {
        let max = 1_000;
        assert!(!is_stale(100, 0, 1_100, max), "exactly max old: kept");
        assert!(is_stale(100, 0, 1_101, max));
        assert!(!is_stale(100, 900, 1_500, max), "issued later: younger");
        assert!(is_stale(0, 100, 1_200, max), "start missed, old issue");
        assert!(!is_stale(5_000, 0, 1_000, max), "from the future: kept");
    }

    #[test]
    fn score_decays_like_bpf() {
        let hl = 100;
        assert_eq!(decayed_score(64, 1000, 1000, hl), 64);
        assert_eq!(decayed_score(64, 1000, 1099, hl), 64);
        assert_eq!(decayed_score(64, 1000, 1100, hl), 32);
        assert_eq!(decayed_score(64, 1000, 1350, hl), 8);
        assert_eq!(decayed_score(64, 1000, 1000 + 64 * hl, hl), 0);
        assert_eq!(
            decayed_score(64, 2000, 1000, hl),
            64,
            "clock behind: no decay"
        );
        assert_eq!(
            decayed_score(64, 0, 1 << 40, 0),
            64,
            "no half-life: no decay"
        );
    }
}
