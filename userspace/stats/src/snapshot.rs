//! One read of the BPF maps: cumulative counters, as BPF left them.
//!
//! The binary fills a [`RawSnapshot`] from the maps (values summed over CPUs where a
//! map is per-CPU); nothing here interprets time windows. The numeric values of
//! [`Locality`] and [`Op`] are those of `enum esn_locality` and `enum esn_io_op` in
//! `bpf/intf.h`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hist::LatHist;
use esn_topology::devt::DevT;

/// Where a request was submitted relative to its device's home node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Locality {
    /// From a CPU of the device's home node.
    Local,
    /// From another node's CPU.
    Remote,
    /// The device has no known home node, or the CPU's node was not known.
    Unknown,
}

impl Locality {
    pub const ALL: [Locality; 3] = [Locality::Local, Locality::Remote, Locality::Unknown];

    /// Of a request submitted from @submit_node to a disk whose home node is
    /// @home (`None`: not known); BPF's ESN_NO_NODE (0xff) is an unknown
    /// submitting node.
    pub fn of(home: Option<u8>, submit_node: u8) -> Locality {
        match home {
            _ if submit_node == u8::MAX => Locality::Unknown,
            None | Some(u8::MAX) => Locality::Unknown,
            Some(h) if h == submit_node => Locality::Local,
            Some(_) => Locality::Remote,
        }
    }

    /// The same spelling as the JSON form.
    pub fn as_str(self) -> &'static str {
        match self {
            Locality::Local => "local",
            Locality::Remote => "remote",
            Locality::Unknown => "unknown",
        }
    }
}

/// Request operation class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    Flush,
    /// Discard, secure erase and write-zeroes.
    Discard,
    /// Zone management, driver-private and anything else.
    Other,
}

impl Op {
    pub const ALL: [Op; 5] = [Op::Read, Op::Write, Op::Flush, Op::Discard, Op::Other];

    /// From `enum esn_io_op`; `None` for a value BPF does not define.
    pub fn from_raw(raw: u8) -> Option<Op> {
        Op::ALL.get(usize::from(raw)).copied()
    }

    /// The same spelling as the JSON form.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
            Op::Other => "other",
        }
    }
}

/// Key of the per-(device, locality, op) table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct IoKey {
    /// Normally a whole disk: BPF folds partitions already.
    pub dev: DevT,
    pub locality: Locality,
    pub op: Op,
}

impl IoKey {
    /// From the fields of `struct esn_io_key` and the disk's home node as BPF
    /// has it (`home`); `None` when `op` is a value this crate does not know (a
    /// newer BPF object), so the caller can skip the entry instead of
    /// misfiling it.
    pub fn from_raw(dev: u32, home: Option<u8>, submit_node: u8, op: u8) -> Option<IoKey> {
        Some(IoKey {
            dev: DevT(dev),
            locality: Locality::of(home, submit_node),
            op: Op::from_raw(op)?,
        })
    }
}

/// Completed requests of one (device, locality, op), cumulative.
#[derive(Default, Clone, Debug, PartialEq)]
pub struct IoCounters {
    pub reqs: u64,
    /// Their size when they started.
    pub bytes: u64,
    /// Completed on another node than the one that submitted them.
    pub cross_completions: u64,
    /// Start to issue to the driver.
    pub queue: LatHist,
    /// Issue to completion.
    pub device: LatHist,
}

impl IoCounters {
    /// True when the entry went backwards anywhere: it was reset (see the crate
    /// docs).
    pub fn is_reset_since(&self, earlier: &IoCounters) -> bool {
        self.reqs < earlier.reqs
            || self.bytes < earlier.bytes
            || self.cross_completions < earlier.cross_completions
            || self.queue.is_reset_since(&earlier.queue)
            || self.device.is_reset_since(&earlier.device)
    }

    /// What was added since `earlier`; all of `self` after a reset.
    pub fn delta(&self, earlier: &IoCounters) -> IoCounters {
        if self.is_reset_since(earlier) {
            return self.clone();
        }
        IoCounters {
            reqs: self.reqs - earlier.reqs,
            bytes: self.bytes - earlier.bytes,
            cross_completions: self.cross_completions - earlier.cross_completions,
            queue: self.queue.delta(&earlier.queue),
            device: self.device.delta(&earlier.device),
        }
    }

    pub fn merge(&mut self, other: &IoCounters) {
        self.reqs = self.reqs.saturating_add(other.reqs);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.cross_completions = self
            .cross_completions
            .saturating_add(other.cross_completions);
        self.queue.merge(&other.queue);
        self.device.merge(&other.device);
    }
}

/// I/O seen from the CPUs of one NUMA node, cumulative.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeIo {
    /// Requests submitted from this node's CPUs.
    pub reqs: u64,
    pub bytes: u64,
    /// ... of those, to a device homed on another node.
    pub remote_reqs: u64,
    pub remote_bytes: u64,
    /// Requests completed on this node's CPUs.
    pub completions: u64,
    /// ... of those, submitted from another node.
    pub cross_completions: u64,
}

impl NodeIo {
    fn fields(&self) -> [u64; 6] {
        [
            self.reqs,
            self.bytes,
            self.remote_reqs,
            self.remote_bytes,
            self.completions,
            self.cross_completions,
        ]
    }

    pub fn is_reset_since(&self, earlier: &NodeIo) -> bool {
        self.fields()
            .iter()
            .zip(earlier.fields())
            .any(|(&c, e)| c < e)
    }

    /// What was added since `earlier`; all of `self` after a reset.
    pub fn delta(&self, earlier: &NodeIo) -> NodeIo {
        if self.is_reset_since(earlier) {
            return *self;
        }
        NodeIo {
            reqs: self.reqs - earlier.reqs,
            bytes: self.bytes - earlier.bytes,
            remote_reqs: self.remote_reqs - earlier.remote_reqs,
            remote_bytes: self.remote_bytes - earlier.remote_bytes,
            completions: self.completions - earlier.completions,
            cross_completions: self.cross_completions - earlier.cross_completions,
        }
    }
}

/// One task's I/O, keyed by tid. `reqs`, `bytes` and `remote_reqs` are cumulative;
/// the other fields describe the task as of its latest request.
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct TaskIo {
    pub tid: u32,
    pub tgid: u32,
    /// See [`comm_from_bytes`].
    pub comm: String,
    pub reqs: u64,
    pub bytes: u64,
    /// Requests submitted from a node other than their device's home.
    pub remote_reqs: u64,
    /// Node it last submitted from.
    pub last_node: Option<u32>,
    /// The device winning the task's majority vote, if any.
    pub dominant_dev: Option<DevT>,
    /// The scheduler's I/O score of the task (decayed to the snapshot's time).
    pub io_score: u64,
}

impl TaskIo {
    /// True when a counter went backwards: the LRU dropped the task and it came back
    /// from zero.
    pub fn is_reset_since(&self, earlier: &TaskIo) -> bool {
        self.reqs < earlier.reqs
            || self.bytes < earlier.bytes
            || self.remote_reqs < earlier.remote_reqs
    }
}

/// Time spent in the mode's BPF programs, summed over them. Zero unless the
/// `kernel.bpf_stats_enabled` sysctl is on, as the kernel only counts then.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BpfCost {
    pub run_time_ns: u64,
    pub run_cnt: u64,
}

impl BpfCost {
    /// What was added since `earlier`; all of `self` when either counter went back
    /// (a program was reloaded, or the stats were switched off and on).
    pub fn delta(&self, earlier: &BpfCost) -> BpfCost {
        if self.run_time_ns < earlier.run_time_ns || self.run_cnt < earlier.run_cnt {
            return *self;
        }
        BpfCost {
            run_time_ns: self.run_time_ns - earlier.run_time_ns,
            run_cnt: self.run_cnt - earlier.run_cnt,
        }
    }
}

/// Everything one interval needs, read at one moment.
#[derive(Default, Clone, Debug, PartialEq)]
pub struct RawSnapshot {
    /// CLOCK_MONOTONIC when the maps were read, in ns.
    pub at_ns: u64,
    pub io: BTreeMap<IoKey, IoCounters>,
    pub nodes: BTreeMap<u32, NodeIo>,
    /// Keyed by tid.
    pub tasks: BTreeMap<u32, TaskIo>,
    pub cost: BpfCost,
    /// Request tracking counters (`ESN_STAT_RQ_*`): requests seen at start...
    pub started: u64,
    /// ... accounted at completion ...
    pub completed: u64,
    /// ... completed without a start (in flight before the programs attached) ...
    pub untracked: u64,
    /// ... not tracked because the in-flight table was full ...
    pub inflight_full: u64,
    /// ... and dropped from the in-flight table as too old to still be running.
    pub aged_out: u64,
    /// Per whole disk: ms with requests in flight since boot
    /// (/sys/block/NAME/stat's io_ticks), read next to the maps.
    pub io_ticks_ms: BTreeMap<DevT, u64>,
}

/// io_ticks (ms) from the text of /sys/block/NAME/stat: its tenth field.
pub fn io_ticks_from_stat(text: &str) -> Option<u64> {
    text.split_whitespace().nth(9)?.parse().ok()
}

/// A task's `comm` from the fixed-size buffer BPF copies it into: up to the first
/// NUL, invalid UTF-8 replaced, control characters (which would break a table or
/// a terminal) shown as '?'.
pub fn comm_from_bytes(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end])
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_match_intf_h() {
        assert_eq!(Op::from_raw(0), Some(Op::Read));
        assert_eq!(Op::from_raw(1), Some(Op::Write));
        assert_eq!(Op::from_raw(2), Some(Op::Flush));
        assert_eq!(Op::from_raw(3), Some(Op::Discard));
        assert_eq!(Op::from_raw(4), Some(Op::Other));
        assert_eq!(Op::from_raw(5), None);
        assert_eq!(Op::from_raw(255), None);
        assert_eq!(IoKey::from_raw(1, Some(0), 1, 9), None);
        assert_eq!(
            IoKey::from_raw(DevT::new(259, 0).0, Some(0), 1, 0),
            Some(IoKey {
                dev: DevT::new(259, 0),
                locality: Locality::Remote,
                op: Op::Read
            })
        );
    }

    #[test]
    fn locality_from_the_disk_home_and_the_submitting_node() {
        assert_eq!(Locality::of(Some(1), 1), Locality::Local);
        assert_eq!(Locality::of(Some(1), 0), Locality::Remote);
        assert_eq!(Locality::of(None, 0), Locality::Unknown);
        assert_eq!(Locality::of(Some(u8::MAX), 0), Locality::Unknown);
        assert_eq!(Locality::of(Some(0), u8::MAX), Locality::Unknown);
    }

    #[test]
    fn comm_stops_at_nul_and_hides_control_chars() {
        assert_eq!(comm_from_bytes(b"fio\0\0\0garbage"), "fio");
        assert_eq!(comm_from_bytes(b"kworker/1:2"), "kworker/1:2");
        assert_eq!(comm_from_bytes(b"a\nb\tc\x1b\0"), "a?b?c?");
        assert_eq!(comm_from_bytes(b"\xffok"), "\u{fffd}ok");
        assert_eq!(comm_from_bytes(b""), "");
        assert_eq!(comm_from_bytes(b"\0abc"), "");
    }

    #[test]
    fn io_counters_reset_is_per_record() {
        let mut before = IoCounters {
            reqs: 100,
            bytes: 409_600,
            ..Default::default()
        };
        before.device.record(10_000);
        // The entry came back from zero, and its bytes already outgrew the old
        // value: bytes must still be taken whole, not as a small difference.
        let after = IoCounters {
            reqs: 3,
            bytes: 1 << 20,
            ..Default::default()
        };
        assert_eq!(after.delta(&before), after);

        let mut grown = before.clone();
        grown.reqs += 5;
        grown.bytes += 20_480;
        grown.device.record(20_000);
        let d = grown.delta(&before);
        assert_eq!((d.reqs, d.bytes, d.device.count), (5, 20_480, 1));
    }
}
