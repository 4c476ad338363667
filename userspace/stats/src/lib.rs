//! Interval reports for `scx_esn observe` (the scheduler's interval, `esn_reading::IntervalStats`, carries one), computed from the cumulative counters the
//! BPF side keeps about blk-mq requests.
//!
//! This crate is pure logic: it never touches BPF maps, sysfs or clocks. The binary
//! reads the maps into a [`RawSnapshot`] every interval and hands two of them to
//! [`build_report`], which returns a [`Report`] to print as text ([`render_text`]) or
//! as one JSON object per line (the `--json` schema is the `Serialize` form of
//! [`Report`]).
//!
//! # The model
//!
//! BPF only ever adds: every counter in a snapshot is cumulative since the maps were
//! created, and a report is the difference between two snapshots. Passing
//! `RawSnapshot::default()` as the earlier one gives totals since start.
//!
//! | table | key | what one entry counts |
//! |---|---|---|
//! | [`RawSnapshot::io`] | (disk, locality, op) | completed requests, their bytes, and two latency histograms |
//! | [`RawSnapshot::nodes`] | NUMA node of a CPU | requests submitted from it, completions run on it |
//! | [`RawSnapshot::tasks`] | tid | requests the task submitted (LRU-bounded on the BPF side) |
//!
//! *Locality* compares the node of the CPU that submitted a request with its
//! device's local node (the device's own node, or the nearest node with CPUs; the
//! one rule is `esn_topology::plan`'s): `local` when they match, `remote` when not,
//! `unknown` when the device has no local node.
//! A *cross completion* is a request completed on another node than the one that
//! submitted it, so its completion work (and cache lines) crossed the interconnect.
//!
//! Latency is split in two ([`report::LatKind`]): `queue` is the time from the
//! request's start to its issue to the driver, `device` from issue to completion.
//! Both are log2 histograms ([`LatHist`]) whose bucket rule is shared with BPF, so
//! percentiles are estimates within a factor of two, interpolated inside a bucket.
//!
//! # Counters that go backwards
//!
//! An entry of a BPF map can disappear and come back from zero: the task table is an
//! LRU, a key may be deleted and recreated, the program may be reloaded. A plain
//! subtraction would then wrap around to a number near 2^64. Instead, whenever a
//! record has any field below its earlier value, the whole record is taken as reset
//! and its current value is the delta. Deciding per record rather than per field
//! keeps a record's fields consistent with each other (bytes still belong to the
//! same requests). Each field read on its own only grows, so a snapshot torn by
//! concurrent BPF updates never looks like a reset.
//!
//! # Devices
//!
//! Keys carry the kernel-internal `dev_t` ([`DevT`](esn_topology::devt::DevT)); BPF already folds partitions
//! into their disk, and [`DeviceTable`](esn_topology::devt::DeviceTable) folds again for keys that name a partition
//! anyway, so a report has one row per whole disk. A device the table does not know
//! keeps a row of its own, named "MAJ:MIN".

pub mod energy;
pub mod hist;
pub mod report;
pub mod snapshot;

pub use energy::{EnergySource, EnergyStats, NodeEnergy};
pub use hist::{slot_of, LatHist, LAT_SLOTS};
pub use report::{
    build_report, render_text, CostReport, DeviceReport, LatKind, LatencyReport, NodeReport,
    Report, ReportKind, ReportOptions, TaskReport, TrackingReport,
};
pub use snapshot::{
    comm_from_bytes, BpfCost, IoCounters, IoKey, Locality, NodeIo, Op, RawSnapshot, TaskIo,
};
