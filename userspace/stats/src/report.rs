//! Reports: the difference between two snapshots, as rates and percentiles.
//!
//! [`Report`]'s `Serialize` form is the `--json` schema of `scx_esn observe`, one
//! object per line; [`render_text`] is the human form. Field names are part of that
//! schema, so renaming one is a breaking change for whoever parses the output.
//!
//! Rates (`iops`, `mb_s`) are `None` when the two snapshots were taken at the same
//! time, and shares (`remote_share`) are `None` when there is nothing to share out,
//! so that "no data" never looks like a measured zero. MB are 10^6 bytes.
//!
//! The device filter only applies to device rows: nodes and tasks are counted by
//! BPF without a device in their key, so they always describe the whole machine.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::energy::EnergyStats;
use crate::hist::LatHist;
use crate::snapshot::{IoCounters, Locality, Op, RawSnapshot};
use esn_topology::devt::{DevT, DeviceTable};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportKind {
    /// Since the previous report.
    #[default]
    Interval,
    /// Since start (the earlier snapshot is the empty one).
    Total,
}

impl ReportKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::Interval => "interval",
            ReportKind::Total => "total",
        }
    }
}

/// Which part of a request's life a latency covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LatKind {
    /// From its start to its issue to the driver: time spent in the block layer.
    Queue,
    /// From issue to completion: time spent in the driver and the hardware.
    Device,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportOptions {
    /// Whole disks (or partitions of them) to show; empty shows every device.
    pub device_filter: Vec<DevT>,
    /// Most tasks to list.
    pub top_tasks: usize,
    pub kind: ReportKind,
}

impl Default for ReportOptions {
    /// Every device, ten tasks, an interval report.
    fn default() -> ReportOptions {
        ReportOptions {
            device_filter: Vec::new(),
            top_tasks: 10,
            kind: ReportKind::Interval,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub kind: ReportKind,
    /// Time between the two snapshots.
    pub elapsed_s: f64,
    /// Sorted by name.
    pub devices: Vec<DeviceReport>,
    /// Sorted by node id.
    pub nodes: Vec<NodeReport>,
    /// Busiest first.
    pub tasks: Vec<TaskReport>,
    pub bpf: CostReport,
    pub tracking: TrackingReport,
    /// The CPUs' energy during the report (`scx_esn observe`; in the
    /// scheduler's intervals it is `IntervalStats::energy`, and this is
    /// `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<EnergyStats>,
}

/// One whole disk, its partitions included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// Kernel name, or "MAJ:MIN" for a device the table does not know.
    pub name: String,
    pub dev: DevT,
    /// Home node; `None` when unknown.
    pub node: Option<u32>,
    /// Completed requests.
    pub reqs: u64,
    pub bytes: u64,
    pub iops: Option<f64>,
    /// 10^6 bytes per second.
    pub mb_s: Option<f64>,
    /// By [`Op::as_str`]; ops without requests are left out.
    pub reqs_by_op: BTreeMap<String, u64>,
    pub local_reqs: u64,
    pub remote_reqs: u64,
    /// Submitted where locality could not be told (no home node).
    pub unknown_reqs: u64,
    /// remote / (local + remote); requests of unknown locality do not count.
    pub remote_share: Option<f64>,
    pub cross_completions: u64,
    /// One entry per (locality, op, kind) with samples, in that order.
    pub latency: Vec<LatencyReport>,
    /// Share of the interval the disk had requests in flight (its io_ticks),
    /// 0-100; `None` when the kernel's counters were not read.
    #[serde(default)]
    pub util_pct: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    pub locality: Locality,
    pub op: Op,
    pub kind: LatKind,
    /// Samples in the histogram.
    pub count: u64,
    pub mean_us: Option<f64>,
    /// Estimated from log2 buckets (see [`LatHist::percentile_ns`]).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// I/O seen from the CPUs of one node; every node the BPF table has is listed,
/// idle ones included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub node: u32,
    /// Requests submitted from this node's CPUs.
    pub reqs: u64,
    pub bytes: u64,
    /// ... of those, to a device homed on another node.
    pub remote_reqs: u64,
    /// remote_reqs / reqs.
    pub remote_share: Option<f64>,
    /// Requests completed on this node's CPUs.
    pub completions: u64,
    /// ... of those, submitted from another node.
    pub cross_completions: u64,
}

/// A task that submitted requests in the interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    pub tid: u32,
    pub tgid: u32,
    pub comm: String,
    pub reqs: u64,
    pub bytes: u64,
    pub iops: Option<f64>,
    pub mb_s: Option<f64>,
    /// Submitted from a node other than their device's home.
    pub remote_reqs: u64,
    /// Name of the device winning its majority vote.
    pub dominant_dev: Option<String>,
    /// Node it last submitted from.
    pub last_node: Option<u32>,
    /// Node of `dominant_dev`: where the scheduler wants the task.
    #[serde(default)]
    pub home_node: Option<u32>,
    /// The scheduler's decayed I/O score at its last request.
    pub io_score: u64,
}

/// Cost of the observing BPF programs over the interval; all zero (and `None`)
/// unless `kernel.bpf_stats_enabled` is on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostReport {
    pub run_time_ns: u64,
    pub run_cnt: u64,
    /// Average cost of one program run.
    pub ns_per_event: Option<f64>,
    /// run_time_ns as a percentage of one CPU's time over the interval.
    pub cpu_pct: Option<f64>,
}

/// How complete the request tracking was over the interval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackingReport {
    pub started: u64,
    pub completed: u64,
    /// Completed without a start: already in flight when the programs attached.
    pub untracked: u64,
    /// Not tracked because the in-flight table was full.
    pub inflight_full: u64,
    /// Dropped from the in-flight table as too old to still be running.
    pub aged_out: u64,
}

/// The report for the time between `prev` and `cur`. With `prev` the default
/// (empty) snapshot it covers everything since start.
pub fn build_report(
    prev: &RawSnapshot,
    cur: &RawSnapshot,
    devices: &DeviceTable,
    opts: &ReportOptions,
) -> Report {
    let elapsed_ns = cur.at_ns.saturating_sub(prev.at_ns);
    let rates = Rates { elapsed_ns };

    Report {
        kind: opts.kind,
        elapsed_s: rates.elapsed_s(),
        devices: device_rows(prev, cur, devices, opts, rates),
        nodes: node_rows(prev, cur),
        tasks: task_rows(prev, cur, devices, opts, rates),
        bpf: cost(prev, cur, rates),
        tracking: TrackingReport {
            started: counter_delta(cur.started, prev.started),
            completed: counter_delta(cur.completed, prev.completed),
            untracked: counter_delta(cur.untracked, prev.untracked),
            inflight_full: counter_delta(cur.inflight_full, prev.inflight_full),
            aged_out: counter_delta(cur.aged_out, prev.aged_out),
        },
        energy: None,
    }
}

/// A lone cumulative counter: one that went back was reset, and all it holds now
/// is new.
fn counter_delta(cur: u64, prev: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else {
        cur
    }
}

fn share(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

#[derive(Clone, Copy)]
struct Rates {
    elapsed_ns: u64,
}

impl Rates {
    fn elapsed_s(self) -> f64 {
        self.elapsed_ns as f64 / 1e9
    }

    fn per_s(self, n: u64) -> Option<f64> {
        (self.elapsed_ns > 0).then(|| n as f64 / self.elapsed_s())
    }

    fn mb_s(self, bytes: u64) -> Option<f64> {
        self.per_s(bytes).map(|b| b / 1e6)
    }
}

/// One disk's requests while they are being summed up.
#[derive(Default)]
struct DiskSum {
    reqs: u64,
    bytes: u64,
    cross_completions: u64,
    by_op: BTreeMap<Op, u64>,
    by_locality: BTreeMap<Locality, u64>,
    latency: BTreeMap<(Locality, Op, LatKind), LatHist>,
}

impl DiskSum {
    fn add(&mut self, locality: Locality, op: Op, d: &IoCounters) {
        self.reqs = self.reqs.saturating_add(d.reqs);
        self.bytes = self.bytes.saturating_add(d.bytes);
        self.cross_completions = self.cross_completions.saturating_add(d.cross_completions);
        let n = self.by_op.entry(op).or_default();
        *n = n.saturating_add(d.reqs);
        let n = self.by_locality.entry(locality).or_default();
        *n = n.saturating_add(d.reqs);
        for (kind, hist) in [(LatKind::Queue, &d.queue), (LatKind::Device, &d.device)] {
            self.latency
                .entry((locality, op, kind))
                .or_default()
                .merge(hist);
        }
    }

    fn locality(&self, l: Locality) -> u64 {
        self.by_locality.get(&l).copied().unwrap_or(0)
    }
}

fn device_rows(
    prev: &RawSnapshot,
    cur: &RawSnapshot,
    devices: &DeviceTable,
    opts: &ReportOptions,
    rates: Rates,
) -> Vec<DeviceReport> {
    // Folded like the keys, so naming a partition picks its disk.
    let wanted: BTreeSet<DevT> = opts
        .device_filter
        .iter()
        .map(|&d| devices.disk_of(d))
        .collect();

    let mut disks: BTreeMap<DevT, DiskSum> = BTreeMap::new();
    for (key, counters) in &cur.io {
        let disk = devices.disk_of(key.dev);
        if !wanted.is_empty() && !wanted.contains(&disk) {
            continue;
        }
        let d = match prev.io.get(key) {
            Some(earlier) => counters.delta(earlier),
            None => counters.clone(),
        };
        // Inserted even when idle, so a quiet disk shows up with zero IOPS.
        disks.entry(disk).or_default().add(key.locality, key.op, &d);
    }

    let mut rows: Vec<DeviceReport> = disks
        .into_iter()
        .map(|(dev, sum)| {
            let info = devices.lookup(dev);
            let local = sum.locality(Locality::Local);
            let remote = sum.locality(Locality::Remote);
            DeviceReport {
                name: info.map_or_else(|| dev.to_string(), |i| i.name.clone()),
                dev,
                node: info.and_then(|i| i.node),
                reqs: sum.reqs,
                bytes: sum.bytes,
                iops: rates.per_s(sum.reqs),
                mb_s: rates.mb_s(sum.bytes),
                reqs_by_op: sum
                    .by_op
                    .iter()
                    .filter(|(_, &n)| n > 0)
                    .map(|(op, &n)| (op.as_str().to_string(), n))
                    .collect(),
                local_reqs: local,
                remote_reqs: remote,
                unknown_reqs: sum.locality(Locality::Unknown),
                remote_share: share(remote, local.saturating_add(remote)),
                cross_completions: sum.cross_completions,
                latency: sum
                    .latency
                    .iter()
                    .filter(|(_, h)| h.total() > 0)
                    .map(|(&(locality, op, kind), h)| LatencyReport {
                        locality,
                        op,
                        kind,
                        count: h.total(),
                        mean_us: h.mean_ns().map(|ns| ns / 1e3),
                        p50_us: h.percentile_ns(0.5).map(|ns| ns / 1e3),
                        p99_us: h.percentile_ns(0.99).map(|ns| ns / 1e3),
                    })
                    .collect(),
                util_pct: utilisation(prev, cur, dev, rates),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name).then(a.dev.cmp(&b.dev)));
    rows
}

/// Busy share of the interval from the disk's io_ticks (ms with at least one
/// request in flight). Like iostat's %util it says how often the disk was
/// busy, not how close an NVMe with deep queues is to its limit.
fn utilisation(prev: &RawSnapshot, cur: &RawSnapshot, disk: DevT, rates: Rates) -> Option<f64> {
    let now = *cur.io_ticks_ms.get(&disk)?;
    let busy_ms = counter_delta(now, prev.io_ticks_ms.get(&disk).copied().unwrap_or(0));
    let elapsed_ms = rates.elapsed_ns as f64 / 1e6;
    (elapsed_ms > 0.0).then(|| (100.0 * busy_ms as f64 / elapsed_ms).min(100.0))
}

fn node_rows(prev: &RawSnapshot, cur: &RawSnapshot) -> Vec<NodeReport> {
    cur.nodes
        .iter()
        .map(|(&node, n)| {
            let d = prev.nodes.get(&node).map_or(*n, |p| n.delta(p));
            NodeReport {
                node,
                reqs: d.reqs,
                bytes: d.bytes,
                remote_reqs: d.remote_reqs,
                remote_share: share(d.remote_reqs, d.reqs),
                completions: d.completions,
                cross_completions: d.cross_completions,
            }
        })
        .collect()
}

fn task_rows(
    prev: &RawSnapshot,
    cur: &RawSnapshot,
    devices: &DeviceTable,
    opts: &ReportOptions,
    rates: Rates,
) -> Vec<TaskReport> {
    let mut rows: Vec<TaskReport> = cur
        .tasks
        .iter()
        .filter_map(|(&tid, t)| {
            // A reused tid whose entry survived keeps counting up from the old
            // task's numbers, so only a counter going back tells a new entry.
            let (reqs, bytes, remote_reqs) = match prev.tasks.get(&tid) {
                Some(p) if !t.is_reset_since(p) => (
                    t.reqs - p.reqs,
                    t.bytes - p.bytes,
                    t.remote_reqs - p.remote_reqs,
                ),
                _ => (t.reqs, t.bytes, t.remote_reqs),
            };
            (reqs > 0).then(|| TaskReport {
                tid,
                tgid: t.tgid,
                comm: t.comm.clone(),
                reqs,
                bytes,
                iops: rates.per_s(reqs),
                mb_s: rates.mb_s(bytes),
                remote_reqs,
                dominant_dev: t.dominant_dev.map(|d| devices.name_of(d)),
                last_node: t.last_node,
                home_node: t
                    .dominant_dev
                    .and_then(|d| devices.lookup(devices.disk_of(d)))
                    .and_then(|i| i.node),
                io_score: t.io_score,
            })
        })
        .collect();
    rows.sort_by(|a, b| b.reqs.cmp(&a.reqs).then(a.tid.cmp(&b.tid)));
    rows.truncate(opts.top_tasks);
    rows
}

fn cost(prev: &RawSnapshot, cur: &RawSnapshot, rates: Rates) -> CostReport {
    let d = cur.cost.delta(&prev.cost);
    // No runs means the kernel was not counting (or nothing ran): a zero CPU share
    // would claim a measurement that was not made.
    let measured = d.run_cnt > 0;
    CostReport {
        run_time_ns: d.run_time_ns,
        run_cnt: d.run_cnt,
        ns_per_event: measured.then(|| d.run_time_ns as f64 / d.run_cnt as f64),
        cpu_pct: if measured && rates.elapsed_ns > 0 {
            Some(d.run_time_ns as f64 / rates.elapsed_ns as f64 * 100.0)
        } else {
            None
        },
    }
}

impl Report {
    /// The `--json` form: one line, no trailing newline.
    pub fn to_json_line(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

/// Longest comm or device name shown in the task table; the kernel's comm is at
/// most 15 bytes, so this only trims names that did not come from it.
const NAME_MAX: usize = 16;

/// The report as aligned tables for a terminal, about 90 columns wide for usual
/// values. Columns widen for unusual ones rather than cut numbers, and big numbers
/// take k/M/G suffixes, so nothing is ever lost or misaligned.
pub fn render_text(report: &Report) -> String {
    let mut out = format!(
        "{} {:.2} s\n",
        report.kind.as_str(),
        finite_or_zero(report.elapsed_s)
    );

    out.push('\n');
    if report.devices.is_empty() {
        out.push_str("no block I/O seen\n");
    } else {
        out.push_str(&device_table(&report.devices));
    }

    if !report.nodes.is_empty() {
        out.push('\n');
        out.push_str(&node_table(&report.nodes));
    }

    out.push('\n');
    if report.tasks.is_empty() {
        out.push_str("no task submitted I/O\n");
    } else {
        out.push_str(&task_table(&report.tasks));
    }

    out.push('\n');
    if let Some(e) = &report.energy {
        out.push_str(&e.line());
        out.push('\n');
    }
    out.push_str(&cost_line(&report.bpf));
    let t = &report.tracking;
    out.push_str(&format!(
        "requests: {} started, {} completed, {} untracked, {} in-flight table full, \
         {} aged out\n",
        t.started, t.completed, t.untracked, t.inflight_full, t.aged_out
    ));
    out
}

fn device_table(devices: &[DeviceReport]) -> String {
    let show_unknown = devices.iter().any(|d| {
        d.latency
            .iter()
            .any(|l| l.kind == LatKind::Device && l.locality == Locality::Unknown)
    });
    let mut localities = vec![Locality::Local, Locality::Remote];
    let mut cols = vec![
        ("DEVICE", Align::Left),
        ("NODE", Align::Right),
        ("REQS", Align::Right),
        ("IOPS", Align::Right),
        ("MB/s", Align::Right),
        ("REMOTE%", Align::Right),
        ("UTIL%", Align::Right),
        ("OP", Align::Left),
        ("LOCAL", Align::Right),
        ("REMOTE", Align::Right),
    ];
    if show_unknown {
        localities.push(Locality::Unknown);
        cols.push(("NO-NODE", Align::Right));
    }

    let mut rows = Vec::new();
    for d in devices {
        let mut first = vec![
            clip(&d.name, usize::MAX),
            opt_u32(d.node),
            fmt_count(d.reqs),
            fmt_opt(d.iops, fmt_rate),
            fmt_opt(d.mb_s, fmt_num),
            fmt_opt(d.remote_share.map(|s| s * 100.0), fmt_pct),
            fmt_opt(d.util_pct, fmt_pct),
        ];
        let ops: BTreeSet<Op> = d
            .latency
            .iter()
            .filter(|l| l.kind == LatKind::Device)
            .map(|l| l.op)
            .collect();
        if ops.is_empty() {
            first.push("-".into());
            first.extend(localities.iter().map(|_| "-".to_string()));
            rows.push(first);
            continue;
        }
        for (i, op) in ops.into_iter().enumerate() {
            let mut row = if i == 0 {
                std::mem::take(&mut first)
            } else {
                vec![String::new(); 7]
            };
            row.push(op.as_str().to_string());
            for &loc in &localities {
                let cell = d
                    .latency
                    .iter()
                    .find(|l| l.kind == LatKind::Device && l.op == op && l.locality == loc)
                    .map_or("-".to_string(), |l| {
                        format!(
                            "{}/{}",
                            fmt_opt(l.p50_us, fmt_num),
                            fmt_opt(l.p99_us, fmt_num)
                        )
                    });
                row.push(cell);
            }
            rows.push(row);
        }
    }
    format!(
        "device latency (issue to completion) as p50/p99 us, by submitting node\n{}",
        table(&cols, &rows)
    )
}

fn node_table(nodes: &[NodeReport]) -> String {
    let cols = [
        ("NODE", Align::Right),
        ("REQS", Align::Right),
        ("MB", Align::Right),
        ("REMOTE%", Align::Right),
        ("COMPLETIONS", Align::Right),
        ("CROSS", Align::Right),
    ];
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            vec![
                n.node.to_string(),
                fmt_count(n.reqs),
                fmt_num(n.bytes as f64 / 1e6),
                fmt_opt(n.remote_share.map(|s| s * 100.0), fmt_pct),
                fmt_count(n.completions),
                fmt_count(n.cross_completions),
            ]
        })
        .collect();
    format!(
        "by node of the submitting CPU (CROSS: completed here, submitted elsewhere)\n{}",
        table(&cols, &rows)
    )
}

fn task_table(tasks: &[TaskReport]) -> String {
    let cols = [
        ("TID", Align::Right),
        ("COMM", Align::Left),
        ("REQS", Align::Right),
        ("IOPS", Align::Right),
        ("MB/s", Align::Right),
        ("REMOTE%", Align::Right),
        ("DEVICE", Align::Left),
        ("NODE", Align::Right),
        ("SCORE", Align::Right),
    ];
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            vec![
                t.tid.to_string(),
                clip(&t.comm, NAME_MAX),
                fmt_count(t.reqs),
                fmt_opt(t.iops, fmt_rate),
                fmt_opt(t.mb_s, fmt_num),
                fmt_opt(share(t.remote_reqs, t.reqs).map(|s| s * 100.0), fmt_pct),
                t.dominant_dev
                    .as_deref()
                    .map_or("-".to_string(), |d| clip(d, NAME_MAX)),
                opt_u32(t.last_node),
                fmt_count(t.io_score),
            ]
        })
        .collect();
    format!("top tasks\n{}", table(&cols, &rows))
}

fn cost_line(c: &CostReport) -> String {
    match c.ns_per_event {
        None => {
            "bpf: no run time measured (sysctl kernel.bpf_stats_enabled=1 to measure)\n".to_string()
        }
        Some(ns) => format!(
            "bpf: {} ms in {} runs, {} ns each, {}% of one CPU\n",
            fmt_num(c.run_time_ns as f64 / 1e6),
            fmt_count(c.run_cnt),
            fmt_num(ns),
            fmt_opt(c.cpu_pct, fmt_pct)
        ),
    }
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// Columns two spaces apart, each as wide as its widest cell; trailing blanks cut.
/// Rows shorter than the header leave their last columns empty.
fn table(cols: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, (title, _))| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .chain([title.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let joined: Vec<String> = cols
            .iter()
            .zip(&widths)
            .map(|((_, align), &w)| {
                let c = cells.next().unwrap_or("");
                match align {
                    Align::Left => format!("{c:<w$}"),
                    Align::Right => format!("{c:>w$}"),
                }
            })
            .collect();
        format!("{}\n", joined.join("  ").trim_end())
    };
    let mut out = line(&mut cols.iter().map(|(t, _)| *t));
    for r in rows {
        out.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    out
}

/// At most `max` characters, control characters shown as '?': a comm filled in by
/// hand rather than by [`crate::comm_from_bytes`] must not break the table.
fn clip(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn opt_u32(v: Option<u32>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

fn fmt_opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map_or("-".to_string(), f)
}

fn finite_or_zero(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

fn fmt_pct(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "-".to_string()
    }
}

/// Whole numbers up to 99999, then three significant digits with a suffix.
fn fmt_count(v: u64) -> String {
    fmt_rate(v as f64)
}

fn fmt_rate(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    if v.abs() < 99_999.5 {
        return format!("{v:.0}");
    }
    with_suffix(v)
}

/// Two decimals below 10, one below 1000, none below 100000, then a suffix: about
/// three significant digits in at most six characters.
fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let a = v.abs();
    if a < 9.995 {
        format!("{v:.2}")
    } else if a < 999.95 {
        format!("{v:.1}")
    } else if a < 99_999.5 {
        format!("{v:.0}")
    } else {
        with_suffix(v)
    }
}

/// About three significant digits with a k/M/G/T/P/E suffix ("12.3k",
/// "456M"): the large-number form of every table here and in `scx_esn top`.
pub fn with_suffix(v: f64) -> String {
    let mut x = v;
    for unit in ["k", "M", "G", "T", "P", "E"] {
        x /= 1000.0;
        // Thresholds account for rounding, so 99.97 shows as "100k", not "100.0k".
        if x.abs() < 99.95 {
            return format!("{x:.1}{unit}");
        }
        if x.abs() < 999.5 {
            return format!("{x:.0}{unit}");
        }
    }
    format!("{v:.1e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_stay_short() {
        assert_eq!(fmt_rate(0.0), "0");
        assert_eq!(fmt_rate(12345.4), "12345");
        assert_eq!(fmt_rate(99_999.6), "100k");
        assert_eq!(fmt_rate(1_234_567.0), "1.2M");
        assert_eq!(fmt_rate(999_999_999.0), "1.0G");
        assert_eq!(fmt_num(4.56789), "4.57");
        assert_eq!(fmt_num(9.999), "10.0");
        assert_eq!(fmt_num(50.6), "50.6");
        assert_eq!(fmt_num(999.96), "1000");
        assert_eq!(fmt_num(549_755_813.9), "550M");
        assert_eq!(fmt_count(u64::MAX), "18.4E");
        assert_eq!(fmt_num(1e300), "1.0e300");
        assert_eq!(fmt_num(f64::NAN), "-");
        assert_eq!(fmt_pct(f64::INFINITY), "-");
    }

    #[test]
    fn table_aligns_and_tolerates_short_rows() {
        let t = table(
            &[("A", Align::Left), ("BB", Align::Right)],
            &[vec!["xyz".into(), "1".into()], vec!["q".into()]],
        );
        assert_eq!(t, "A    BB\nxyz   1\nq\n");
    }

    #[test]
    fn counter_delta_takes_a_reset_counter_whole() {
        assert_eq!(counter_delta(10, 4), 6);
        assert_eq!(counter_delta(3, 4), 3);
        assert_eq!(counter_delta(0, u64::MAX), 0);
    }
}
