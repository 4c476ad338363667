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
    /// The histograms of keys without a slot in io_slots.
    pub io_hists: &'a dyn MapCore,
    /// The histograms' direct-mapped table: each CPU's copy of a slot
    /// carries the key it counts for.
    pub io_slots: &'a dyn MapCore,
    /// Disk -> home node, as registered: the locality of both tables' keys.
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

/// Add one CPU's copy of a histogram entry to @io under its key, the
/// submitting node folded into a locality by @homes. A free slot (dev 0)
/// and an op this build does not know add nothing.
fn add_io_entry(
    io: &mut BTreeMap<IoKey, IoCounters>,
    homes: &BTreeMap<u32, u8>,
    key: &bpf_intf::esn_io_key,
    hist: &bpf_intf::esn_io_hist,
) {
    if key.dev == 0 {
        return;
    }
    let home = homes.get(&key.dev).copied();
    if let Some(io_key) = IoKey::from_raw(key.dev, home, key.submit_node, key.op) {
        io.entry(io_key).or_default().merge(&io_counters_of(hist));
    }
}

/// Add every CPU's copy of one io_slots slot to @io: the CPUs' copies of a
/// slot may count for different keys (each CPU's first key to hash there).
fn add_io_slot(
    io: &mut BTreeMap<IoKey, IoCounters>,
    homes: &BTreeMap<u32, u8>,
    per_cpu: &[Vec<u8>],
) -> Result<()> {
    for value in per_cpu {
        let slot: bpf_intf::esn_io_slot = read_pod(value)?;
        add_io_entry(io, homes, &slot.key, &slot.hist);
    }
    Ok(())
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
    /// per submitting node and per CPU, in two tables (io_slots, and
    /// io_hists for keys without a slot); the tables and the CPUs add up
    /// and the nodes fold into local, remote and unknown here.
    pub fn io_counters(&self) -> Result<BTreeMap<IoKey, IoCounters>> {
        let homes = self.dev_homes()?;
        let mut io: BTreeMap<IoKey, IoCounters> = BTreeMap::new();
        for idx in 0..bpf_intf::esn_limits_ESN_IO_SLOTS {
            if let Some(per_cpu) = self
                .io_slots
                .lookup_percpu(&idx.to_ne_bytes(), MapFlags::ANY)
                .context("reading io_slots")?
            {
                add_io_slot(&mut io, &homes, &per_cpu)?;
            }
        }
        for key in self.io_hists.keys() {
            let Some(per_cpu) = self.io_hists.lookup_percpu(&key, MapFlags::ANY)? else {
                continue; // deleted between keys() and lookup()
            };
            let k: bpf_intf::esn_io_key = read_pod(&key)?;
            for value in &per_cpu {
                add_io_entry(&mut io, &homes, &k, &read_pod(value)?);
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

    /// One CPU's copy of a slot as BPF writes it.
    fn slot_bytes(dev: u32, submit_node: u8, op: u8, reqs: u64, lat_ns: u64) -> Vec<u8> {
        // SAFETY: a C struct of integers; all-zero is a valid value.
        let mut slot: bpf_intf::esn_io_slot = unsafe { std::mem::zeroed() };
        slot.key.dev = dev;
        slot.key.submit_node = submit_node;
        slot.key.op = op;
        let d = bpf_intf::esn_lat_kind_ESN_LAT_DEVICE as usize;
        slot.hist.reqs = reqs;
        slot.hist.lat_cnt[d] = reqs;
        slot.hist.lat_sum_ns[d] = reqs * lat_ns;
        slot.hist.slots[d][10] = reqs;
        let size = std::mem::size_of::<bpf_intf::esn_io_slot>();
        // SAFETY: reading the struct's own bytes.
        unsafe { std::slice::from_raw_parts(&slot as *const _ as *const u8, size) }.to_vec()
    }

    #[test]
    fn slot_copies_count_for_their_own_keys() {
        let read = bpf_intf::esn_io_op_ESN_OP_READ as u8;
        let write = bpf_intf::esn_io_op_ESN_OP_WRITE as u8;
        let disk = 259 << 20;
        let homes = BTreeMap::from([(disk, 1u8)]);
        let mut io = BTreeMap::new();
        // One slot: CPU 0 counts local reads, CPU 1 remote writes (another
        // key that hashed there first on it), CPU 2 nothing yet.
        let per_cpu = vec![
            slot_bytes(disk, 1, read, 5, 1000),
            slot_bytes(disk, 0, write, 2, 3000),
            slot_bytes(0, 0, 0, 0, 0),
        ];
        add_io_slot(&mut io, &homes, &per_cpu).unwrap();
        // Another slot on CPU 1 with more local reads: they add up.
        add_io_slot(&mut io, &homes, &[slot_bytes(disk, 1, read, 3, 1000)]).unwrap();
        assert_eq!(io.len(), 2, "{io:?}");
        let local_reads = IoKey::from_raw(disk, Some(1), 1, read).unwrap();
        let remote_writes = IoKey::from_raw(disk, Some(1), 0, write).unwrap();
        assert_eq!(io[&local_reads].reqs, 8);
        assert_eq!(io[&local_reads].device.count, 8);
        assert_eq!(io[&local_reads].device.sum_ns, 8000);
        assert_eq!(io[&remote_writes].reqs, 2);
        assert_eq!(io[&remote_writes].device.sum_ns, 6000);
        assert_ne!(local_reads.locality, remote_writes.locality);
        assert!(
            add_io_slot(&mut io, &homes, &[vec![0u8; 8]]).is_err(),
            "a value of another layout is refused, not misread"
        );
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
