// SPDX-License-Identifier: GPL-2.0-only
//! What each field of a served interval means: the metadata the scx_stats
//! socket answers `stats_meta` with, and what `scx_esn --help-stats` prints.
//!
//! ```text
//!  IntervalStats ─┬─ nodes[]    NodeLoad ── waits  NodeWaits
//!                 ├─ control[]  Decision
//!                 ├─ health     Health
//!                 ├─ energy     EnergyStats ── nodes[] NodeEnergy
//!                 └─ io         Report ─┬─ devices[] DeviceReport ── latency[] LatencyReport
//!                                       ├─ nodes[]   NodeReport
//!                                       ├─ tasks[]   TaskReport
//!                                       ├─ bpf       CostReport
//!                                       ├─ tracking  TrackingReport
//!                                       └─ energy    EnergyStats (observe only)
//! ```
//!
//! The scx_stats derive cannot describe these types (it has no `Option`, no
//! `bool`, no enums), so the description is written here, once, in the
//! scx_stats shape (datum / array / dict of u64, i64, float, string or a
//! struct). A test serializes a fully populated interval and walks it against
//! this table: a field added to the types without a line here, or a line
//! left after a field is gone, fails it.

/// The value of one field, in scx_stats' terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    U64,
    I64,
    Float,
    /// Strings, and the enums that serialize as one (`"local"`, `"read"`).
    String,
    /// JSON `true`/`false`; scx_stats has no boolean, so it is offered as u64.
    Bool,
    /// Another struct of this table, by name.
    Struct(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Datum(Kind),
    Array(Kind),
    /// A JSON object keyed by `key` (always a string on the wire).
    Dict {
        key: Kind,
        datum: Kind,
    },
}

#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub shape: Shape,
    /// `null` when there is nothing to say (no samples, unknown node...).
    pub nullable: bool,
    pub desc: &'static str,
}

#[derive(Clone, Copy, Debug)]
pub struct StructDoc {
    pub name: &'static str,
    pub desc: &'static str,
    pub fields: &'static [Field],
}

/// The struct every interval starts from.
pub const TOP: &str = "IntervalStats";

use Kind::*;
use Shape::*;

const fn f(name: &'static str, shape: Shape, desc: &'static str) -> Field {
    Field {
        name,
        shape,
        nullable: false,
        desc,
    }
}

/// A field that is `null` when there is nothing to say.
const fn opt(name: &'static str, shape: Shape, desc: &'static str) -> Field {
    Field {
        name,
        shape,
        nullable: true,
        desc,
    }
}

const STRUCTS: &[StructDoc] = &[
    StructDoc {
        name: "IntervalStats",
        desc: "scx_esn: one interval of the running scheduler",
        fields: &[
            f("counters", Dict { key: String, datum: U64 }, "Scheduler and request-tracking events during the interval, by name (place_local, place_spill, io_stolen, ...)"),
            f("nodes", Array(Struct("NodeLoad")), "Per NUMA node with CPUs"),
            f("control", Array(Struct("Decision")), "The threshold controller's last decision per learning node (empty with --threshold)"),
            f("health", Datum(Struct("Health")), "Is the scheduler keeping up"),
            opt("energy", Datum(Struct("EnergyStats")), "The CPUs' energy during the interval (null when neither counted nor estimated)"),
            f("io", Datum(Struct("Report")), "Block I/O during the interval, as scx_esn observe reports it"),
        ],
    },
    StructDoc {
        name: "NodeLoad",
        desc: "One NUMA node with CPUs during the interval",
        fields: &[
            f("node", Datum(U64), "NUMA node id"),
            f("placed", Datum(U64), "I/O-bound tasks placed on the node at the end of the interval"),
            f("threshold", Datum(U64), "Most I/O-bound tasks the node keeps before spilling"),
            f("waits", Datum(Struct("NodeWaits")), "Runnable-to-running waits on the node's CPUs"),
            f("cpus", Datum(U64), "Online CPUs of the node"),
            opt("busy_pct", Datum(Float), "Share of the node's CPU time not idle, 0-100 (/proc/stat)"),
            f("spill_in", Datum(U64), "Placements onto this node of tasks homed on another node"),
            f("spill_out", Datum(U64), "Placements elsewhere of tasks homed on this node"),
            f("stolen_from", Datum(U64), "Placed I/O tasks of this node's queue run by another node's CPU"),
        ],
    },
    StructDoc {
        name: "NodeWaits",
        desc: "Runnable-to-running waits on one node, summed over its CPUs",
        fields: &[
            f("io_waits", Datum(U64), "Waits of placed I/O-bound tasks"),
            f("io_wait_ns", Datum(U64), "Their total, ns (mean = io_wait_ns / io_waits; the controller weighs its excess over the idle wake-ups' mean)"),
            f("fair_waits", Datum(U64), "Waits of all other tasks"),
            f("fair_wait_ns", Datum(U64), "Their total, ns"),
            f("io_idle_waits", Datum(U64), "Of io_waits, the wake-ups that went straight to an idle CPU"),
            f("io_idle_wait_ns", Datum(U64), "Their total, ns: an uncontended wake-up's cost; the controller weighs the mean of io_wait_ns beyond its mean as contention"),
        ],
    },
    StructDoc {
        name: "Decision",
        desc: "The controller's decision for one node hosting block devices",
        fields: &[
            f("node", Datum(U64), "NUMA node id"),
            f("threshold", Datum(U64), "Threshold in force for the next interval (one above the learned one while exploring)"),
            f("p_numa", Datum(Float), "NUMA penalty: remote over local device latency"),
            f("p_numa_source", Datum(String), "Where p_numa came from: prior, measured or override"),
            f("spill_contention", Datum(Float), "What a task spilled to the next node waits there for a CPU, over local device latency (0 until measured); the threshold balances P_cont against p_numa + this"),
            opt("curve", Array(Float), "a, b, c of the fitted contention curve P_cont(n) = a*n^2 + b*n + c"),
            opt("n_star", Datum(U64), "Balance point the fitted curve asks for, before hysteresis and rate limiting"),
            f("exploring", Datum(Bool), "true while this interval tries one task above the learned threshold"),
            f("placed", Datum(U64), "Placed tasks in the sample this decision answers"),
            opt("p_cont", Datum(Float), "Contention penalty observed in that sample"),
            opt("iops", Datum(Float), "Under --objective throughput: completions per second of the node's devices in that sample"),
            opt("climb", Datum(String), "Under --objective throughput: what the next interval does (settled, probing all, probing up, probing down)"),
        ],
    },
    StructDoc {
        name: "Health",
        desc: "Whether the scheduler keeps up: the kernel unloads one that leaves a runnable task unrun for the watchdog's timeout",
        fields: &[
            f("dispatched", Datum(U64), "Tasks handed to a CPU (direct, queued or stolen)"),
            f("fallbacks", Datum(U64), "Placements that found no node with room (scheduled like any task)"),
            opt("max_wait_ns", Datum(U64), "Upper bound of the longest runnable-to-running wait, ns (log2 resolution)"),
            f("watchdog_timeout_ms", Datum(U64), "The sched_ext watchdog's timeout, ms"),
        ],
    },
    StructDoc {
        name: "EnergyStats",
        desc: "The CPUs' energy during the interval, and what it bought",
        fields: &[
            f("source", Datum(String), "rapl (the processor's counters, through powercap) or estimated (the model: busy and idle time at --energy-watts)"),
            f("nodes", Array(Struct("NodeEnergy")), "Per NUMA node with CPUs"),
            f("joules", Datum(Float), "All nodes' energy, J"),
            f("watts", Datum(Float), "joules / the interval's length, W"),
            opt("joules_per_io", Datum(Float), "joules / completed block requests, J"),
            opt("tradeoff", Datum(Float), "throughput / (latency x energy): IOPS / (mean device latency, ms x energy per I/O, mJ); higher is better"),
        ],
    },
    StructDoc {
        name: "NodeEnergy",
        desc: "One NUMA node's CPU energy during the interval",
        fields: &[
            f("node", Datum(U64), "NUMA node id"),
            f("joules", Datum(Float), "Energy, J (a RAPL package over several nodes is split by their CPUs)"),
            f("watts", Datum(Float), "joules / the interval's length, W"),
        ],
    },
    StructDoc {
        name: "Report",
        desc: "Block I/O between two readings",
        fields: &[
            f("kind", Datum(String), "interval, or total since start"),
            f("elapsed_s", Datum(Float), "Seconds the report covers"),
            f("devices", Array(Struct("DeviceReport")), "Per whole disk, by name"),
            f("nodes", Array(Struct("NodeReport")), "Per NUMA node, I/O seen from its CPUs"),
            f("tasks", Array(Struct("TaskReport")), "Top I/O tasks, busiest first"),
            f("bpf", Datum(Struct("CostReport")), "Cost of the observing BPF programs"),
            f("tracking", Datum(Struct("TrackingReport")), "How complete the request tracking was"),
            opt("energy", Datum(Struct("EnergyStats")), "scx_esn observe: the CPUs' energy during the report (absent in the scheduler's io, whose energy is the interval's)"),
        ],
    },
    StructDoc {
        name: "DeviceReport",
        desc: "One whole disk, its partitions included",
        fields: &[
            f("name", Datum(String), "Kernel name, or MAJ:MIN for an unknown device"),
            f("dev", Datum(String), "Device number, MAJ:MIN"),
            opt("node", Datum(U64), "Home NUMA node (null: unknown)"),
            f("reqs", Datum(U64), "Completed requests"),
            f("bytes", Datum(U64), "Their bytes"),
            opt("iops", Datum(Float), "Requests per second"),
            opt("mb_s", Datum(Float), "10^6 bytes per second"),
            f("reqs_by_op", Dict { key: String, datum: U64 }, "Requests by op (read, write, flush, discard, other)"),
            f("local_reqs", Datum(U64), "Submitted from a CPU of the disk's home node"),
            f("remote_reqs", Datum(U64), "Submitted from another node's CPU"),
            f("unknown_reqs", Datum(U64), "Submitted where locality could not be told"),
            opt("remote_share", Datum(Float), "remote / (local + remote)"),
            f("cross_completions", Datum(U64), "Completed on another node than the one that submitted"),
            f("latency", Array(Struct("LatencyReport")), "Latency per (locality, op, kind) with samples"),
            opt("util_pct", Datum(Float), "Share of the interval with requests in flight (io_ticks), 0-100"),
        ],
    },
    StructDoc {
        name: "LatencyReport",
        desc: "Latency of one (locality, op, kind) of a disk",
        fields: &[
            f("locality", Datum(String), "local, remote or unknown"),
            f("op", Datum(String), "read, write, flush, discard or other"),
            f("kind", Datum(String), "queue (start to issue) or device (issue to completion)"),
            f("count", Datum(U64), "Samples"),
            opt("mean_us", Datum(Float), "Mean, us"),
            opt("p50_us", Datum(Float), "Median, us (from log2 buckets)"),
            opt("p99_us", Datum(Float), "99th percentile, us (from log2 buckets)"),
        ],
    },
    StructDoc {
        name: "NodeReport",
        desc: "Block I/O seen from the CPUs of one NUMA node",
        fields: &[
            f("node", Datum(U64), "NUMA node id"),
            f("reqs", Datum(U64), "Requests submitted from its CPUs"),
            f("bytes", Datum(U64), "Their bytes"),
            f("remote_reqs", Datum(U64), "Of those, to a disk homed on another node"),
            opt("remote_share", Datum(Float), "remote_reqs / reqs"),
            f("completions", Datum(U64), "Requests completed on its CPUs"),
            f("cross_completions", Datum(U64), "Of those, submitted from another node"),
        ],
    },
    StructDoc {
        name: "TaskReport",
        desc: "A task that submitted block I/O in the interval",
        fields: &[
            f("tid", Datum(U64), "Thread id"),
            f("tgid", Datum(U64), "Process id"),
            f("comm", Datum(String), "Command name"),
            f("reqs", Datum(U64), "Requests submitted"),
            f("bytes", Datum(U64), "Their bytes"),
            opt("iops", Datum(Float), "Requests per second"),
            opt("mb_s", Datum(Float), "10^6 bytes per second"),
            f("remote_reqs", Datum(U64), "Submitted from a node other than their disk's home"),
            opt("dominant_dev", Datum(String), "The disk it uses most (its majority vote)"),
            opt("last_node", Datum(U64), "Node it last submitted from (its current node)"),
            opt("home_node", Datum(U64), "Home node of dominant_dev: where the scheduler wants it"),
            f("io_score", Datum(U64), "The scheduler's decayed I/O score at its last request"),
        ],
    },
    StructDoc {
        name: "CostReport",
        desc: "Cost of the observing BPF programs (zero unless kernel.bpf_stats_enabled=1)",
        fields: &[
            f("run_time_ns", Datum(U64), "Time spent in the programs, ns"),
            f("run_cnt", Datum(U64), "Program runs"),
            opt("ns_per_event", Datum(Float), "Mean cost of one run, ns"),
            opt("cpu_pct", Datum(Float), "run_time_ns as a share of one CPU's time, %"),
        ],
    },
    StructDoc {
        name: "TrackingReport",
        desc: "How complete the request tracking was",
        fields: &[
            f("started", Datum(U64), "Requests whose start was seen"),
            f("completed", Datum(U64), "Requests whose completion was accounted"),
            f("untracked", Datum(U64), "Completed without a start (in flight when the programs attached)"),
            f("inflight_full", Datum(U64), "Not tracked: the in-flight table was full"),
            f("aged_out", Datum(U64), "Dropped from the in-flight table as too old to still run"),
        ],
    },
];

/// Every struct a served interval contains, the top one first.
pub fn structs() -> &'static [StructDoc] {
    STRUCTS
}

pub fn find(name: &str) -> Option<&'static StructDoc> {
    STRUCTS.iter().find(|s| s.name == name)
}

/// Where `value` differs from the struct `name` describes: a field without a
/// description, a description without a field, or a value of another kind.
/// Empty when they agree.
pub fn mismatches(name: &str, value: &serde_json::Value) -> Vec<std::string::String> {
    let mut out = Vec::new();
    check_struct(name, value, name, &mut out);
    out
}

fn check_struct(
    name: &str,
    value: &serde_json::Value,
    path: &str,
    out: &mut Vec<std::string::String>,
) {
    let Some(doc) = find(name) else {
        out.push(format!("{path}: no description of struct {name}"));
        return;
    };
    let Some(obj) = value.as_object() else {
        out.push(format!("{path}: {name} is not a JSON object"));
        return;
    };
    for key in obj.keys() {
        if !doc.fields.iter().any(|f| f.name == key) {
            out.push(format!("{path}.{key}: serialized but not described"));
        }
    }
    for field in doc.fields {
        let here = format!("{path}.{}", field.name);
        match obj.get(field.name) {
            None => out.push(format!("{here}: described but not serialized")),
            Some(serde_json::Value::Null) if field.nullable => {}
            Some(serde_json::Value::Null) => out.push(format!("{here}: null but not nullable")),
            Some(v) => check_shape(field.shape, v, &here, out),
        }
    }
}

fn check_shape(
    shape: Shape,
    v: &serde_json::Value,
    path: &str,
    out: &mut Vec<std::string::String>,
) {
    match shape {
        Datum(kind) => check_kind(kind, v, path, out),
        Array(kind) => match v.as_array() {
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    check_kind(kind, item, &format!("{path}[{i}]"), out);
                }
            }
            None => out.push(format!("{path}: not an array")),
        },
        Dict { datum, .. } => match v.as_object() {
            Some(map) => {
                for (k, item) in map {
                    check_kind(datum, item, &format!("{path}[{k}]"), out);
                }
            }
            None => out.push(format!("{path}: not an object (dict)")),
        },
    }
}

fn check_kind(kind: Kind, v: &serde_json::Value, path: &str, out: &mut Vec<std::string::String>) {
    let ok = match kind {
        U64 => v.is_u64(),
        I64 => v.is_i64(),
        Float => v.is_number(),
        String => v.is_string(),
        Bool => v.is_boolean(),
        Struct(name) => {
            check_struct(name, v, path, out);
            return;
        }
    };
    if !ok {
        out.push(format!("{path}: {v} is not {kind:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_struct_named_in_a_field_is_described_and_reachable() {
        let mut reached = vec![TOP];
        let mut i = 0;
        while i < reached.len() {
            let doc = find(reached[i]).unwrap_or_else(|| panic!("{} not described", reached[i]));
            for field in doc.fields {
                let kind = match field.shape {
                    Datum(k) | Array(k) | Dict { datum: k, .. } => k,
                };
                if let Struct(name) = kind {
                    if !reached.contains(&name) {
                        reached.push(name);
                    }
                }
            }
            i += 1;
        }
        let mut all: Vec<_> = STRUCTS.iter().map(|s| s.name).collect();
        all.sort();
        reached.sort();
        assert_eq!(all, reached, "a described struct no interval contains");
    }

    #[test]
    fn no_field_is_described_twice() {
        for s in STRUCTS {
            let mut names: Vec<_> = s.fields.iter().map(|f| f.name).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), s.fields.len(), "{}", s.name);
        }
    }

    #[test]
    fn a_wrong_kind_an_extra_key_and_a_missing_key_are_found() {
        let v = serde_json::json!({
            "started": 1, "completed": "two", "untracked": 0,
            "inflight_full": 0, "surprise": 1
        });
        let m = mismatches("TrackingReport", &v);
        assert!(
            m.iter()
                .any(|s| s.contains("completed") && s.contains("not U64")),
            "{m:?}"
        );
        assert!(
            m.iter()
                .any(|s| s.contains("surprise: serialized but not described")),
            "{m:?}"
        );
        assert!(
            m.iter()
                .any(|s| s.contains("aged_out: described but not serialized")),
            "{m:?}"
        );
        assert!(m.iter().all(|s| !s.contains(".started")), "{m:?}");
    }
}
