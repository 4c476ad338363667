// SPDX-License-Identifier: GPL-2.0-only
//! `scx_esn observe`: block I/O observation without the scheduler.
//!
//! ```text
//!  topology ─► rodata (CPU -> node) ─► hooks chosen from kernel BTF ─► load
//!  ─► dev_home_node ─► attach ─► every --interval:
//!        snapshot + energy reading ─► delta vs the previous ones
//!        ─► text or one JSON line; age out requests in flight too long
//!  ─► at --duration or SIGINT/SIGTERM: a "total" report since start, exit 0
//! ```
//!
//! Needs root (BPF) and a kernel with BTF (5.11+), not sched_ext.

use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use esn_power::energy::{self, Reading};
use esn_stats::report::{build_report, render_text, ReportKind, ReportOptions};
use esn_stats::snapshot::RawSnapshot;
use esn_topology::devt::{DevT, DeviceTable};
use esn_topology::Topology;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::OpenObject;
use log::{info, warn};

use crate::blkobs::{self, BlkObsMaps, HookPrefs};
use crate::cli::{positive_secs, ObserveOpts};
use crate::observe_skel::*;
use esn_topology::plan::Plan;

/// Resolve --device names against the topology, failing on a typo rather
/// than printing nothing forever.
pub fn device_filter(devices: &DeviceTable, names: &[String]) -> Result<Vec<DevT>> {
    names
        .iter()
        .map(|name| {
            devices.by_name(name).map(|d| d.dev).with_context(|| {
                let known: Vec<&str> = devices.devices().iter().map(|d| d.name.as_str()).collect();
                format!(
                    "--device {name}: no such disk (known: {}); give a whole-disk name \
                     from `scx_esn topology`",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )
            })
        })
        .collect()
}

/// How the observer is loaded: the parts of the options that are not about
/// printing.
pub struct ObserverSetup {
    pub io_half_life_ms: u64,
    pub verbose: u8,
    pub hooks: HookPrefs,
}

/// Loads and attaches the observer, then hands `body` a function that reads
/// a snapshot (in-flight requests too old to still run are aged out at
/// each read). Everything is detached when `body` returns.
pub fn with_observer<T>(
    topo: &Topology,
    plan: &Plan,
    devices: &DeviceTable,
    setup: &ObserverSetup,
    body: impl FnOnce(&mut dyn FnMut() -> Result<RawSnapshot>) -> Result<T>,
) -> Result<T> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    blkobs::check_kernel_release(release.trim())?;
    crate::sched::route_libbpf_log(setup.verbose);
    scx_utils::try_set_rlimit_infinity();
    let hooks = blkobs::choose_hooks(&blkobs::probe_kernel(), setup.hooks)?;
    info!(
        "tracking requests from {} ({} raw tracepoint(s))",
        hooks.start_point,
        hooks.raw_tp.len()
    );

    let mut open_object = MaybeUninit::<OpenObject>::uninit();
    let mut open = ObserveSkelBuilder::default()
        .open(&mut open_object)
        .context("opening the BPF observer")?;
    {
        let rodata = open
            .maps
            .rodata_data
            .as_mut()
            .context("BPF object has no rodata")?;
        rodata.nr_nodes = plan.nr_nodes;
        rodata.io_half_life_ns = setup.io_half_life_ms * 1_000_000;
        rodata.start_at_insert = hooks.starts_at_insert();
        rodata.keep_issue_times = setup.hooks.keep_issue_times;
        rodata.use_io_slots = !setup.hooks.no_io_slots;
        rodata.has_path_disks = blkobs::topology_paths(topo).next().is_some();
        for (slot, &node) in rodata.cpu_node.iter_mut().zip(&plan.cpu_node) {
            *slot = node;
        }
    }
    blkobs::apply_hooks(open.open_object_mut(), &hooks, true);
    let mut skel = open.load().context(
        "loading the BPF observer failed (run as root on a kernel with BTF, 5.11 or later; \
         -v shows libbpf's verifier log)",
    )?;
    let registered = blkobs::register_devices(&skel.maps.dev_home_node, devices)?;
    blkobs::register_paths(&skel.maps.path_disk_dev, blkobs::topology_paths(topo))?;
    if registered == 0 {
        warn!("no block device with a known NUMA node: every request counts as locality unknown");
    }
    skel.attach().context("attaching the block tracepoints")?;
    info!("observing block I/O; {registered} device(s) with a home node");

    let maps = BlkObsMaps {
        io_half_life_ns: setup.io_half_life_ms * 1_000_000,
        inflight: &skel.maps.inflight,
        io_hists: &skel.maps.io_hists,
        io_slots: &skel.maps.io_slots,
        dev_home_node: &skel.maps.dev_home_node,
        node_io: &skel.maps.node_io,
        task_io: &skel.maps.task_io,
        stats: &skel.maps.stats,
    };
    let mut aged_out = 0u64;
    let mut issue_hook = blkobs::IssueHook::new(&hooks);
    let mut read = || -> Result<RawSnapshot> {
        issue_hook.poll(skel.object(), &maps)?;
        aged_out += maps.age_inflight(blkobs::INFLIGHT_MAX_AGE.as_nanos() as u64)?;
        let mut snap =
            maps.snapshot(plan.nr_nodes, blkobs::object_cost(skel.object()), aged_out)?;
        snap.io_ticks_ms = blkobs::read_io_ticks(devices);
        Ok(snap)
    };
    body(&mut read)
}

pub fn run(
    topo: &Topology,
    opts: &ObserveOpts,
    sysfs: &Path,
    io_half_life_ms: u64,
    verbose: u8,
    shutdown: &AtomicBool,
) -> Result<()> {
    let interval = positive_secs("--interval", opts.interval)?;
    let duration = opts
        .duration
        .map(|d| positive_secs("--duration", d))
        .transpose()?;
    let setup = ObserverSetup {
        io_half_life_ms,
        verbose,
        hooks: HookPrefs {
            force_raw_tp: opts.raw_tp,
            no_io_start: opts.no_io_start,
            keep_issue_times: opts.keep_issue_times,
            no_io_slots: opts.no_io_slots,
        },
    };
    // The scheduler's CPU -> node map and locality rule; thresholds do not matter.
    let plan = Plan::new(topo, None)?;
    let devices = plan.device_table(topo);
    let filter = device_filter(&devices, &opts.device)?;
    let meter = crate::sched::energy_meter(sysfs, &opts.energy, &plan);
    with_observer(topo, &plan, &devices, &setup, |read| {
        let started = Instant::now();
        let first = (read()?, meter.read());
        let mut prev = first.clone();
        let mut next = started + interval;
        let mut keep_up = started + energy::KEEP_UP_EVERY;
        let report_opts = |kind| ReportOptions {
            device_filter: filter.clone(),
            top_tasks: opts.top,
            kind,
        };

        loop {
            let deadline = duration.map(|d| started + d);
            let wake = deadline.map_or(next, |d| d.min(next));
            while Instant::now() < wake && !shutdown.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50).min(wake - Instant::now().min(wake)));
                // RAPL counters wrap: a long --interval reads them between.
                if Instant::now() >= keep_up {
                    meter.read();
                    keep_up += energy::KEEP_UP_EVERY;
                }
            }
            let finished =
                shutdown.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d);
            let cur = (read()?, meter.read());
            if Instant::now() >= next {
                emit(
                    &prev,
                    &cur,
                    &devices,
                    &report_opts(ReportKind::Interval),
                    opts.json,
                )?;
                prev = cur.clone();
                next += interval;
            }
            if finished {
                return emit(
                    &first,
                    &cur,
                    &devices,
                    &report_opts(ReportKind::Total),
                    opts.json,
                );
            }
        }
    })
}

/// One report between two readings, with the CPUs' energy between them.
pub fn report_between(
    prev: &(RawSnapshot, Reading),
    cur: &(RawSnapshot, Reading),
    devices: &DeviceTable,
    opts: &ReportOptions,
) -> esn_stats::report::Report {
    let mut report = build_report(&prev.0, &cur.0, devices, opts);
    report.energy = energy::interval(&prev.1, &cur.1).map(|e| e.with_io(&report));
    report
}

/// Prints one report; a closed stdout is `output::Closed` (the caller
/// stops: nobody reads the reports any more).
fn emit(
    prev: &(RawSnapshot, Reading),
    cur: &(RawSnapshot, Reading),
    devices: &DeviceTable,
    opts: &ReportOptions,
    json: bool,
) -> Result<()> {
    let report = report_between(prev, cur, devices, opts);
    if json {
        match serde_json::to_string(&report) {
            Ok(line) => crate::output::write(&format!("{line}\n")),
            Err(err) => {
                warn!("cannot serialise the report: {err}");
                Ok(())
            }
        }
    } else {
        crate::output::write(&render_text(&report))
    }
}
