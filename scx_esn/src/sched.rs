// SPDX-License-Identifier: GPL-2.0-only
//! Load, attach and run the BPF scheduler.
//!
//! ```text
//!  open ─► rodata (tunables, topology) ─► load (verifier) ─► maps (thresholds,
//!  devices) ─► attach ─► loop { exited? · shutdown? · --stats line } ─► detach
//! ```
//!
//! Exit codes: 0 after SIGINT/SIGTERM or a kernel-initiated unregister that
//! is not an error; an error (BPF error, watchdog stall) is returned with the
//! kernel's exit reason, so main exits 1.

use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use esn_stats::devt::DeviceTable;
use esn_stats::report::{build_report, render_text, ReportKind, ReportOptions};
use esn_stats::snapshot::RawSnapshot;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use log::{info, warn};
use scx_utils::libbpf_clap_opts::LibbpfOpts;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};
use scx_utils::{try_set_rlimit_infinity, UserExitInfo};

use crate::blkobs::{self, BlkObsMaps, HookPrefs};
use crate::bpf_intf;
use crate::bpf_skel::*;
use crate::cli::SchedOpts;
use crate::counters::{self, Counters, NodeLoad, NodeWaits};
use crate::plan::Plan;

/// How often requests that never completed are looked for.
const INFLIGHT_AGING_EVERY: Duration = Duration::from_secs(5);

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    plan: Plan,
    devices: DeviceTable,
    io_half_life_ns: u64,
}

/// libbpf's own messages go to our log. Its warnings (the verifier log on a
/// load failure) always show; its info lines ("member X not found in kernel,
/// skipping") are routine on older kernels and only show with -v.
fn libbpf_to_log(level: libbpf_rs::PrintLevel, msg: String) {
    let msg = msg.trim_end();
    match level {
        libbpf_rs::PrintLevel::Warn => warn!("{msg}"),
        _ => log::debug!("{msg}"),
    }
}

/// libbpf resolves the object's `__kconfig` externs from the running
/// kernel's config; say what to do before it fails with a bare EINVAL.
fn kconfig_opts(opts: &SchedOpts) -> Result<LibbpfOpts> {
    if let Some(path) = &opts.kconfig {
        std::fs::read_to_string(path)
            .with_context(|| format!("--kconfig {}: cannot read it", path.display()))?;
        return Ok(LibbpfOpts {
            kconfig: Some(path.display().to_string()),
            ..Default::default()
        });
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let boot_config = format!("/boot/config-{}", release.trim());
    if !Path::new(&boot_config).exists() && !Path::new("/proc/config.gz").exists() {
        bail!(
            "neither {boot_config} nor /proc/config.gz exists, and libbpf needs the \
             kernel's config to load the scheduler: pass --kconfig FILE with this \
             kernel's config (e.g. from its package)"
        );
    }
    Ok(LibbpfOpts::default())
}

/// Send libbpf's messages to our log; -vv adds its debug output.
pub fn route_libbpf_log(verbose: u8) {
    libbpf_rs::set_print(Some((
        if verbose > 1 {
            libbpf_rs::PrintLevel::Debug
        } else {
            libbpf_rs::PrintLevel::Info
        },
        libbpf_to_log,
    )));
}

impl<'a> Scheduler<'a> {
    pub fn init(
        opts: &SchedOpts,
        plan: Plan,
        devices: DeviceTable,
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<Self> {
        // Root here may lack CAP_SYS_RESOURCE; recent kernels charge BPF
        // memory to the cgroup, so a failure only warns.
        try_set_rlimit_infinity();
        route_libbpf_log(opts.verbose);
        // Chosen before open: the request hooks load with the scheduler.
        let hooks = blkobs::choose_hooks(&blkobs::probe_kernel(), HookPrefs::default())?;

        // Not obj_builder.debug(): debug(false) silences libbpf altogether.
        let builder = BpfSkelBuilder::default();
        let open_opts = kconfig_opts(opts)?.into_bpf_open_opts();
        let mut skel = scx_ops_open!(builder, open_object, esn_ops, open_opts)?;
        skel.struct_ops.esn_ops_mut().exit_dump_len = opts.exit_dump_len;

        let rodata = skel
            .maps
            .rodata_data
            .as_mut()
            .context("BPF object has no rodata")?;
        rodata.slice_ns = opts.slice_us * 1000;
        rodata.io_min_score = opts.io_min_score;
        rodata.io_half_life_ns = opts.io_half_life_ms * 1_000_000;
        rodata.io_idle_ns = opts.io_idle_ms * 1_000_000;
        rodata.io_steal_after_ns = opts.io_steal_after_ms * 1_000_000;
        rodata.nr_nodes = plan.nr_nodes;
        for (slot, &node) in rodata.cpu_node.iter_mut().zip(&plan.cpu_node) {
            *slot = node;
        }
        for (node, &has) in plan.node_has_cpus.iter().enumerate() {
            rodata.node_has_cpus[node] = has as u8;
            rodata.spill_order[node] = plan.spill_row(node);
        }

        blkobs::apply_hooks(skel.open_object_mut(), &hooks, false);

        let mut skel = scx_ops_load!(skel, esn_ops, uei)?;

        for (node, &limit) in plan.thresholds.iter().enumerate() {
            skel.maps
                .node_threshold
                .update(
                    &(node as u32).to_ne_bytes(),
                    &limit.to_ne_bytes(),
                    MapFlags::ANY,
                )
                .with_context(|| format!("setting the threshold of node {node}"))?;
        }
        for dev in &plan.devices {
            skel.maps
                .dev_home_node
                .update(&dev.dev.to_ne_bytes(), &[dev.run_node as u8], MapFlags::ANY)
                .with_context(|| format!("registering device {}", dev.name))?;
            info!(
                "device {}: node {}{}",
                dev.name,
                dev.node,
                if dev.run_node != dev.node {
                    format!(
                        " (no CPUs there; its I/O tasks run on node {})",
                        dev.run_node
                    )
                } else {
                    String::new()
                }
            );
        }
        for why in &plan.skipped {
            info!("device {why}: not placed");
        }
        if plan.devices.is_empty() {
            warn!("no block device with a known NUMA node: every task is scheduled fairly");
        }

        let link = scx_ops_attach!(skel, esn_ops)?;
        info!(
            "scx_esn attached: {} node(s), thresholds {:?}",
            plan.nr_nodes, plan.thresholds
        );
        Ok(Scheduler {
            skel,
            link: Some(link),
            plan,
            devices,
            io_half_life_ns: opts.io_half_life_ms * 1_000_000,
        })
    }

    fn read_counters(&self) -> Result<Counters> {
        let maps = self.blkobs_maps();
        let mut out = [0u64; counters::NAMES.len()];
        for (idx, slot) in out.iter_mut().enumerate() {
            *slot = maps.stat(idx as u32)?;
        }
        Ok(out)
    }

    /// Cumulative runnable-to-running waits, indexed by node.
    fn read_node_waits(&self) -> Result<Vec<NodeWaits>> {
        let mut out = vec![NodeWaits::default(); self.plan.nr_nodes as usize];
        for (node, sum) in out.iter_mut().enumerate() {
            let per_cpu = self
                .skel
                .maps
                .node_sched
                .lookup_percpu(&(node as u32).to_ne_bytes(), MapFlags::ANY)
                .context("reading the node_sched map")?
                .unwrap_or_default();
            for value in &per_cpu {
                let v: bpf_intf::esn_node_sched = blkobs::read_pod(value)?;
                sum.io_waits += v.io_waits;
                sum.io_wait_ns += v.io_wait_ns;
                sum.fair_waits += v.fair_waits;
                sum.fair_wait_ns += v.fair_wait_ns;
            }
        }
        Ok(out)
    }

    fn node_loads(&self, waits: &[NodeWaits]) -> Vec<NodeLoad> {
        let bss = self.skel.maps.bss_data.as_ref();
        self.plan
            .node_has_cpus
            .iter()
            .enumerate()
            .filter(|(_, &has)| has)
            .map(|(node, _)| NodeLoad {
                node: node as u32,
                placed: bss.map(|b| b.nr_placed[node]).unwrap_or(0),
                threshold: self.plan.thresholds[node],
                waits: waits.get(node).copied().unwrap_or_default(),
            })
            .collect()
    }

    fn blkobs_maps(&self) -> BlkObsMaps<'_> {
        BlkObsMaps {
            io_half_life_ns: self.io_half_life_ns,
            inflight: &self.skel.maps.inflight,
            io_hists: &self.skel.maps.io_hists,
            node_io: &self.skel.maps.node_io,
            task_io: &self.skel.maps.task_io,
            stats: &self.skel.maps.stats,
        }
    }

    /// The block I/O report `scx_esn observe` prints, from the scheduler's
    /// own copy of the same BPF tables.
    fn io_snapshot(&self, aged_out: u64) -> Result<RawSnapshot> {
        self.blkobs_maps().snapshot(
            self.plan.nr_nodes,
            blkobs::object_cost(self.skel.object()),
            aged_out,
        )
    }

    /// Run until `shutdown` is set or the kernel unloads the scheduler.
    pub fn run(
        &mut self,
        shutdown: &AtomicBool,
        stats_every: Option<Duration>,
    ) -> Result<UserExitInfo> {
        let mut last = self.read_counters()?;
        let mut last_waits = self.read_node_waits()?;
        let mut aged_out = 0;
        let mut last_io = self.io_snapshot(aged_out)?;
        let mut next_stats = stats_every.map(|d| Instant::now() + d);
        let mut next_aging = Instant::now() + INFLIGHT_AGING_EVERY;
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            std::thread::sleep(Duration::from_millis(100));
            if Instant::now() >= next_aging {
                aged_out += self
                    .blkobs_maps()
                    .age_inflight(blkobs::INFLIGHT_MAX_AGE.as_nanos() as u64)?;
                next_aging += INFLIGHT_AGING_EVERY;
            }
            if let (Some(at), Some(every)) = (next_stats, stats_every) {
                if Instant::now() >= at {
                    let now = self.read_counters()?;
                    let waits = self.read_node_waits()?;
                    let wait_deltas: Vec<NodeWaits> = waits
                        .iter()
                        .zip(&last_waits)
                        .map(|(now, before)| now.delta(before))
                        .collect();
                    println!(
                        "{}",
                        counters::format_line(
                            &counters::delta(&now, &last),
                            &self.node_loads(&wait_deltas)
                        )
                    );
                    last = now;
                    last_waits = waits;
                    let io = self.io_snapshot(aged_out)?;
                    let report = build_report(
                        &last_io,
                        &io,
                        &self.devices,
                        &ReportOptions {
                            device_filter: Vec::new(),
                            top_tasks: 5,
                            kind: ReportKind::Interval,
                        },
                    );
                    print!("{}", render_text(&report));
                    last_io = io;
                    next_stats = Some(at + every);
                }
            }
        }
        // Dropping the link detaches the struct_ops: the kernel switches
        // every task back to the fair class before we read the exit info.
        self.link.take();
        info!("scx_esn detached");
        uei_report!(&self.skel, uei)
    }
}

/// SIGINT/SIGTERM set the flag; the loop notices within 100 ms.
pub fn shutdown_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    ctrlc::set_handler(move || set.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;
    Ok(flag)
}
