// SPDX-License-Identifier: GPL-2.0-only
//! The userspace half of blk-mq observation (bpf/blkobs.bpf.h), shared by
//! the scheduler and `scx_esn observe`.
//!
//! ```text
//!  kernel BTF ─► choose_hooks() ─► autoload one program per tracepoint
//!  topology   ─► device_table() ─► dev_home_node map (locality in BPF)
//!  BPF maps   ─► BlkObsMaps::snapshot() ─► esn_stats::RawSnapshot
//!                BlkObsMaps::age_inflight() drops requests that never
//!                completed (a lost completion must not fill the table)
//! ```
//!
//! Both skeletons carry the same maps and programs (the header is included
//! by both objects), so everything here works on `&dyn MapCore` and on
//! program names, never on one skeleton's generated types.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{Context, Result};
use esn_reading::Stat;
use esn_stats::devt::{DevT, DeviceInfo, DeviceTable};
use esn_stats::hist::{LatHist, LAT_SLOTS};
use esn_stats::snapshot::{
    comm_from_bytes, BpfCost, IoCounters, IoKey, NodeIo, RawSnapshot, TaskIo,
};
use esn_topology::Topology;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf_intf;

/// A request in flight longer than this lost its completion (or was freed
/// without one) and is dropped from the table. Far above any real I/O
/// latency, including SCSI/NVMe timeouts with their retries.
pub const INFLIGHT_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(120);

/// The request tracepoints blkobs.bpf.h hooks, in the order it defines them.
/// Each has a tp_btf program `esn_<tp>` and a raw_tp twin `esn_<tp>_raw`.
pub const RQ_TRACEPOINTS: [&str; 6] = [
    "block_io_start",
    "block_rq_insert",
    "block_rq_issue",
    "block_rq_requeue",
    "block_rq_merge",
    "block_rq_complete",
];

/// What the running kernel offers, probed from its BTF.
#[derive(Debug, Clone, Default)]
pub struct KernelHooks {
    /// Tracepoints with a `btf_trace_<name>` type: tp_btf can attach.
    pub btf_tracepoints: Vec<String>,
    /// Tracepoints present at all (tracefs), for the raw_tp fallback.
    pub tracepoints: Vec<String>,
}

/// How to hook the request tracepoints; the overrides exist to test the
/// fallbacks on a kernel that does not need them.
#[derive(Debug, Clone, Copy, Default)]
pub struct HookPrefs {
    pub force_raw_tp: bool,
    pub no_io_start: bool,
    /// BPF times every issue itself, as on queues without block stats.
    pub keep_issue_times: bool,
}

/// The programs to load, by name, and a note for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookChoice {
    pub programs: Vec<String>,
    pub start_point: &'static str,
    pub raw_tp: Vec<String>,
    /// The issue program, loaded but left detached until a request completes
    /// without the kernel's issue stamp (IssueHook); `None` when it must
    /// run from the start (requests start at insert: it charges the ones
    /// issued directly).
    pub lazy_issue: Option<String>,
}

impl HookChoice {
    /// Requests are charged at block_rq_insert (no block_io_start): BPF then
    /// remembers each request until it completes (its rodata says so).
    pub fn starts_at_insert(&self) -> bool {
        self.start_point == "block_rq_insert"
    }
}

/// Pick one program per usable tracepoint. block_io_start (6.5+) is the
/// request's start in its submitter's context, and the task's attribution
/// too; without it block_rq_insert is the nearest start, block_bio_queue
/// attributes (once per bio), and block_rq_merge drops the entries BPF then
/// keeps for requests merged away (with block_io_start there are none).
pub fn choose_hooks(kernel: &KernelHooks, prefs: HookPrefs) -> Result<HookChoice> {
    let has = |tp: &str| {
        kernel.btf_tracepoints.iter().any(|t| t == tp) || kernel.tracepoints.iter().any(|t| t == tp)
    };
    let mut wanted: Vec<&str> = Vec::new();
    let at_insert = !has("block_io_start") || prefs.no_io_start;
    let start_point = if at_insert {
        "block_rq_insert"
    } else {
        "block_io_start"
    };
    wanted.extend([start_point, "block_rq_issue", "block_rq_requeue"]);
    if at_insert {
        wanted.push("block_rq_merge");
    }
    wanted.push("block_rq_complete");

    let mut programs = Vec::new();
    if at_insert {
        programs.push(BIO_HOOK.to_string());
    }
    let mut raw_tp = Vec::new();
    for tp in wanted {
        if !has(tp) {
            if matches!(
                tp,
                "block_rq_issue" | "block_rq_complete" | "block_rq_insert"
            ) {
                anyhow::bail!(
                    "the kernel has no {tp} tracepoint, which block I/O tracking needs \
                     (CONFIG_BLOCK and CONFIG_TRACEPOINTS)"
                );
            }
            // requeue and merge only keep the table exact; aging covers them.
            log::warn!("no {tp} tracepoint: requests merged or requeued age out instead");
            continue;
        }
        if prefs.force_raw_tp || !kernel.btf_tracepoints.iter().any(|t| t == tp) {
            programs.push(format!("esn_{tp}_raw"));
            raw_tp.push(tp.to_string());
        } else {
            programs.push(format!("esn_{tp}"));
        }
    }
    let lazy_issue = (!at_insert)
        .then(|| {
            programs
                .iter()
                .find(|p| p.starts_with("esn_block_rq_issue"))
                .cloned()
        })
        .flatten();
    Ok(HookChoice {
        programs,
        start_point,
        raw_tp,
        lazy_issue,
    })
}

/// Probe the running kernel: BTF typedefs for tp_btf, tracefs for raw_tp.
pub fn probe_kernel() -> KernelHooks {
    let mut hooks = KernelHooks::default();
    match libbpf_rs::btf::Btf::from_vmlinux() {
        Ok(btf) => {
            for tp in RQ_TRACEPOINTS {
                let name = format!("btf_trace_{tp}");
                if btf
                    .type_by_name::<libbpf_rs::btf::types::Typedef>(&name)
                    .is_some()
                {
                    hooks.btf_tracepoints.push(tp.to_string());
                }
            }
        }
        Err(err) => log::warn!("no kernel BTF ({err}): using raw tracepoints"),
    }
    for base in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        for tp in RQ_TRACEPOINTS {
            if std::path::Path::new(&format!("{base}/events/block/{tp}")).exists()
                && !hooks.tracepoints.iter().any(|t| t == tp)
            {
                hooks.tracepoints.push(tp.to_string());
            }
        }
    }
    hooks
}

/// The per-bio attribution program of iotrace.bpf.h: loaded only where
/// block_io_start is not the start point (it attributes there itself).
pub const BIO_HOOK: &str = "esn_bio_queue";

/// Names of every block I/O program: blkobs.bpf.h's (both variants) and the
/// bio attribution hook.
pub fn all_blkobs_programs() -> impl Iterator<Item = String> {
    RQ_TRACEPOINTS
        .iter()
        .flat_map(|tp| [format!("esn_{tp}"), format!("esn_{tp}_raw")])
        .chain(std::iter::once(BIO_HOOK.to_string()))
}

/// Disable autoload for every block I/O program not in @choice. With
/// @only_blkobs, also for every other program: the observer's object
/// carries helper programs from the scx headers that need sched_ext.
pub fn apply_hooks(object: &mut libbpf_rs::OpenObject, choice: &HookChoice, only_blkobs: bool) {
    let ours: Vec<String> = all_blkobs_programs().collect();
    for mut prog in object.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let keep = if ours.contains(&name) {
            choice.programs.contains(&name)
        } else {
            !only_blkobs
        };
        if !keep {
            prog.set_autoload(false);
        }
        if choice.lazy_issue.as_deref() == Some(name.as_str()) {
            prog.set_autoattach(false);
        }
    }
}

/// The issue program where the kernel stamps issue times itself
/// (rq->io_start_time_ns, on every queue with block stats: wbt is on by
/// default): it would run once per request to do nothing, so it stays
/// detached until BPF counts a request that completed without a time.
/// From then on it keeps issue times in BPF; the requests completed before
/// have no device latency (rq_no_issue_time says how many).
pub struct IssueHook {
    /// The lazy program, until its one attempt to attach.
    program: Option<String>,
    /// Held while attached: dropping it detaches.
    link: Option<libbpf_rs::Link>,
}

impl IssueHook {
    pub fn new(choice: &HookChoice) -> Self {
        IssueHook {
            program: choice.lazy_issue.clone(),
            link: None,
        }
    }

    /// Attach the issue program if it is lazy, still detached, and a
    /// request has completed without an issue time. A failed attach costs
    /// only those queues' device latency: it is logged once, not fatal.
    pub fn poll(&mut self, object: &libbpf_rs::Object, maps: &BlkObsMaps) -> Result<()> {
        // Tried once: program is None after the first attempt.
        if self.program.is_none() || maps.stat(Stat::RqNoIssueTime)? == 0 {
            return Ok(());
        }
        let name = self.program.take().unwrap_or_default();
        // progs_mut() borrows the object shared: attaching only reads it.
        let attached = object
            .progs_mut()
            .find(|p| p.name().to_string_lossy() == name)
            .with_context(|| format!("no BPF program {name} in the object"))
            .and_then(|prog| {
                prog.attach()
                    .with_context(|| format!("attaching {name} (block_rq_issue)"))
            });
        match attached {
            Ok(link) => self.link = Some(link),
            Err(err) => {
                log::warn!("{err:#}: requests on queues without block stats get no device latency");
                return Ok(());
            }
        }
        log::info!(
            "a request completed without the kernel's issue time (a queue without block \
             stats): timing issues in BPF from now on"
        );
        Ok(())
    }
}

/// The node a device's requests count as local to. A machine with a single
/// node has nothing remote, whatever sysfs says about the device.
pub fn effective_node(topo: &Topology, home: Option<u32>) -> Option<u32> {
    match (home, topo.nodes.as_slice()) {
        (Some(node), _) => Some(node),
        (None, [only]) => Some(only.id),
        _ => None,
    }
}

/// Disks (partitions fold into them) with the node their I/O is local to.
pub fn device_table(topo: &Topology) -> DeviceTable {
    DeviceTable::new(
        topo.devices
            .iter()
            .map(|d| DeviceInfo {
                name: d.name.clone(),
                dev: DevT::new(d.major, d.minor),
                node: effective_node(topo, d.home_node),
                partitions: d
                    .partitions
                    .iter()
                    .map(|p| DevT::new(p.major, p.minor))
                    .collect(),
            })
            .collect(),
    )
}

/// Tell BPF each disk's node, for the local/remote split.
pub fn register_devices(dev_home_node: &dyn MapCore, devices: &DeviceTable) -> Result<usize> {
    let mut n = 0;
    for dev in devices.devices() {
        let Some(node) = dev.node else { continue };
        dev_home_node
            .update(&dev.dev.0.to_ne_bytes(), &[node as u8], MapFlags::ANY)
            .with_context(|| format!("registering device {}", dev.name))?;
        n += 1;
    }
    Ok(n)
}

/// Tell BPF the path disks of multipath heads (hidden: a head's requests are
/// issued on them) by name: `(path, head's kernel dev_t)`.
pub fn register_paths<'p>(
    path_disk_dev: &dyn MapCore,
    paths: impl IntoIterator<Item = (&'p str, u32)>,
) -> Result<()> {
    for (path, head) in paths {
        let mut key = [0u8; bpf_intf::ESN_DISK_NAME_LEN as usize];
        let name = path.as_bytes();
        if name.len() >= key.len() {
            continue; // the kernel cuts names there: it cannot match
        }
        key[..name.len()].copy_from_slice(name);
        path_disk_dev
            .update(&key, &head.to_ne_bytes(), MapFlags::ANY)
            .with_context(|| format!("registering multipath path disk {path}"))?;
    }
    Ok(())
}

/// Every multipath head's paths, with the head's kernel dev_t.
pub fn topology_paths(topo: &Topology) -> impl Iterator<Item = (&str, u32)> {
    topo.devices.iter().flat_map(|d| {
        d.paths
            .iter()
            .map(move |p| (p.as_str(), DevT::new(d.major, d.minor).0))
    })
}

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

/// Refuse kernels whose request tracepoints take (queue, request): the
/// programs are written for the one-argument form of 5.11 and later.
pub fn check_kernel_release(release: &str) -> Result<()> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    if major == 0 {
        log::warn!("cannot parse the kernel release {release:?}; trying anyway");
        return Ok(());
    }
    if (major, minor) < (5, 11) {
        anyhow::bail!(
            "kernel {release} is older than 5.11, whose block request tracepoints this \
             needs (and BTF): run scx_esn observe on 5.11 or later, or use the bpftrace \
             scripts in scripts/"
        );
    }
    Ok(())
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

/// run_time_ns and run_cnt of a loaded program, from its fdinfo (filled
/// while kernel.bpf_stats_enabled is 1).
pub fn prog_cost(fd: i32) -> BpfCost {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    BpfCost {
        run_time_ns: field("run_time_ns:"),
        run_cnt: field("run_cnt:"),
    }
}

/// Summed cost of the loaded block I/O programs of an object.
pub fn object_cost(object: &libbpf_rs::Object) -> BpfCost {
    let ours: Vec<String> = all_blkobs_programs().collect();
    let mut cost = BpfCost::default();
    for prog in object.progs() {
        if !ours.contains(&prog.name().to_string_lossy().into_owned()) {
            continue;
        }
        let c = prog_cost(prog.as_fd().as_raw_fd());
        cost.run_time_ns += c.run_time_ns;
        cost.run_cnt += c.run_cnt;
    }
    cost
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

/// Each disk's io_ticks (ms busy since boot) from /sys/block/NAME/stat; a
/// disk whose file cannot be read is left out (its utilisation shows "-").
pub fn read_io_ticks(devices: &DeviceTable) -> BTreeMap<DevT, u64> {
    devices
        .devices()
        .iter()
        .filter_map(|d| {
            let text = std::fs::read_to_string(format!("/sys/block/{}/stat", d.name)).ok()?;
            Some((d.dev, esn_stats::snapshot::io_ticks_from_stat(&text)?))
        })
        .collect()
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

    fn kernel(btf: &[&str], tracefs: &[&str]) -> KernelHooks {
        KernelHooks {
            btf_tracepoints: btf.iter().map(|s| s.to_string()).collect(),
            tracepoints: tracefs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn modern_kernel_uses_tp_btf_and_io_start() {
        let k = kernel(&RQ_TRACEPOINTS, &RQ_TRACEPOINTS);
        let c = choose_hooks(&k, HookPrefs::default()).unwrap();
        assert_eq!(c.start_point, "block_io_start");
        assert_eq!(
            c.programs,
            [
                "esn_block_io_start",
                "esn_block_rq_issue",
                "esn_block_rq_requeue",
                "esn_block_rq_complete"
            ]
        );
        assert!(c.raw_tp.is_empty());
        assert!(!c.starts_at_insert());
        assert_eq!(c.lazy_issue.as_deref(), Some("esn_block_rq_issue"));
    }

    #[test]
    fn pre_6_5_kernel_starts_at_insert() {
        let old: Vec<&str> = RQ_TRACEPOINTS[1..].to_vec();
        let c = choose_hooks(&kernel(&old, &old), HookPrefs::default()).unwrap();
        assert_eq!(c.start_point, "block_rq_insert");
        assert!(c.starts_at_insert());
        assert_eq!(
            c.programs,
            [
                "esn_bio_queue",
                "esn_block_rq_insert",
                "esn_block_rq_issue",
                "esn_block_rq_requeue",
                "esn_block_rq_merge",
                "esn_block_rq_complete"
            ]
        );
        assert_eq!(c.lazy_issue, None, "the issue charges direct issues");
    }

    #[test]
    fn missing_btf_falls_back_to_raw_tp_per_tracepoint() {
        let c = choose_hooks(
            &kernel(&["block_rq_issue"], &RQ_TRACEPOINTS),
            HookPrefs::default(),
        )
        .unwrap();
        assert!(c.programs.contains(&"esn_block_rq_issue".to_string()));
        assert!(c.programs.contains(&"esn_block_io_start_raw".to_string()));
        assert!(c
            .programs
            .contains(&"esn_block_rq_complete_raw".to_string()));
        assert_eq!(c.raw_tp.len(), 3);
        assert_eq!(c.lazy_issue.as_deref(), Some("esn_block_rq_issue"));
    }

    #[test]
    fn forced_fallbacks() {
        let k = kernel(&RQ_TRACEPOINTS, &RQ_TRACEPOINTS);
        let c = choose_hooks(
            &k,
            HookPrefs {
                force_raw_tp: true,
                no_io_start: true,
                keep_issue_times: false,
            },
        )
        .unwrap();
        assert_eq!(c.start_point, "block_rq_insert");
        // The bio hook is tp_btf only, as it always was.
        assert!(
            c.programs
                .iter()
                .all(|p| p.ends_with("_raw") || p == BIO_HOOK),
            "{c:?}"
        );
    }

    #[test]
    fn no_completion_tracepoint_is_an_error_that_says_why() {
        let k = kernel(&["block_io_start", "block_rq_issue"], &[]);
        let err = choose_hooks(&k, HookPrefs::default()).unwrap_err();
        assert!(err.to_string().contains("block_rq_complete"), "{err}");
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
    fn kernel_release_floor() {
        assert!(check_kernel_release("5.10.0-28-amd64").is_err());
        assert!(check_kernel_release("4.19.0").is_err());
        assert!(check_kernel_release("5.11.0").is_ok());
        assert!(check_kernel_release("6.1.0-50-amd64").is_ok());
        assert!(check_kernel_release("7.3.4+deb13-amd64").is_ok());
        assert!(check_kernel_release("weird").is_ok(), "unparsable: try");
        let err = check_kernel_release("5.4.0").unwrap_err().to_string();
        assert!(err.contains("5.11"), "{err}");
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

    #[test]
    fn program_names_cover_both_variants() {
        let all: Vec<String> = all_blkobs_programs().collect();
        assert_eq!(all.len(), 13);
        assert!(all.contains(&"esn_block_rq_merge_raw".to_string()));
        assert!(all.contains(&BIO_HOOK.to_string()));
    }
}
