// SPDX-License-Identifier: GPL-2.0-only
//! Load, attach and run the BPF scheduler.
//!
//! ```text
//!  open ─► rodata (tunables, topology) ─► load (verifier) ─► maps (thresholds,
//!  devices) ─► attach ─► loop { exited? · shutdown? · controller step ·
//!  --stats line } ─► detach ─► save what the controller learned
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
use esn_stats::snapshot::RawSnapshot;
use esn_topology::devt::DeviceTable;
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{AsRawLibbpf, MapCore, MapFlags, OpenObject};
use log::{info, warn};
use scx_utils::libbpf_clap_opts::LibbpfOpts;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};
use scx_utils::{try_set_rlimit_infinity, UserExitInfo};

use crate::blkobs::{self, BlkObsMaps, HookPrefs};
use crate::bpf_intf;
use crate::bpf_skel::*;
use crate::cli::SchedOpts;
use crate::every::Every;
use crate::socket;
use esn_controller::live::{self as control, Control};
use esn_controller::NodeWaits;
use esn_power::cpustat;
use esn_power::energy::{self, Meter};
use esn_reading::counters::{self, Counters, NodeSched, Stat};
use esn_reading::{Cumulative, NodeGauge, Reading};
use esn_topology::plan::Plan;

/// How often the loop samples the kernel (placed tasks, the issue hook,
/// --dvfs) and looks for a shutdown or the kernel's exit.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// How often requests that never completed are looked for.
const INFLIGHT_AGING_EVERY: Duration = Duration::from_secs(5);

/// How often the learned state is written while running (and at exit), so a
/// crash or power loss costs at most this much learning.
const STATE_SAVE_EVERY: Duration = Duration::from_secs(60);

/// sched_ext's watchdog timeout when the scheduler sets none
/// (SCX_WATCHDOG_MAX_TIMEOUT, 30 s).
const WATCHDOG_DEFAULT_MS: u64 = 30_000;

/// The threshold controller's part of the options; `None` pins thresholds.
pub struct Learning {
    pub config: esn_controller::ControllerConfig,
    pub interval: Duration,
    pub state_file: Option<std::path::PathBuf>,
}

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    plan: Plan,
    devices: DeviceTable,
    io_half_life_ns: u64,
    /// What node_threshold holds now, indexed by node.
    thresholds: Vec<u32>,
    control: Option<Control>,
    control_every: Duration,
    /// What the kernel's watchdog allows a runnable task to wait, in ms.
    watchdog_timeout_ms: u64,
    issue_hook: blkobs::IssueHook,
    /// The CPUs' energy per node (RAPL, or the model's estimate).
    energy: Meter,
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

/// `scx_ops_attach!` attaches the struct_ops map itself, after the other
/// programs. libbpf 1.5 and later would also try from `skel.attach()`, find no
/// link slot in libbpf-rs's skeleton and warn "BPF map skeleton link is
/// uninitialized" at every start; an operator reads that as a fault.
fn keep_struct_ops_for_explicit_attach(map: &libbpf_rs::OpenMapMut) {
    // SAFETY: the map belongs to the open object borrowed here; the call only
    // clears a flag that libbpf reads at attach time.
    let rc = unsafe {
        libbpf_rs::libbpf_sys::bpf_map__set_autoattach(map.as_libbpf_object().as_ptr(), false)
    };
    if rc != 0 {
        warn!("could not turn off libbpf's own struct_ops attach ({rc}); it may warn once");
    }
}

/// Can the kernel re-enqueue a CPU's local queue from any BPF program
/// (6.19 and later)? Then `ops.cpu_release` is deprecated (the kernel warns at
/// every load) and the scheduler hooks `sched_switch` for the same work
/// instead (bpf/esn.bpf.c, `esn_sched_switch`); older kernels keep the callback.
fn reenqueue_from_anywhere() -> bool {
    ["scx_bpf_dsq_reenq", "scx_bpf_reenqueue_local___v2"]
        .iter()
        .any(|ksym| scx_utils::compat::ksym_exists(ksym).unwrap_or(false))
}

/// The libbpf options given, checked: libbpf resolves the object's
/// `__kconfig` externs from the running kernel's config, and scx_utils
/// drops every option silently when a --kconfig file cannot be read, so say
/// what to do before libbpf fails with a bare EINVAL.
fn libbpf_opts(opts: &SchedOpts) -> Result<LibbpfOpts> {
    let given = opts.libbpf.clone();
    if let Some(path) = &given.kconfig {
        std::fs::read_to_string(path)
            .with_context(|| format!("--kconfig {path}: cannot read it"))?;
    } else {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let boot_config = format!("/boot/config-{}", release.trim());
        if !Path::new(&boot_config).exists() && !Path::new("/proc/config.gz").exists() {
            bail!(
                "neither {boot_config} nor /proc/config.gz exists, and libbpf needs the \
                 kernel's config to load the scheduler: pass --kconfig FILE with this \
                 kernel's config (e.g. from its package)"
            );
        }
    }
    if let Some(path) = &given.btf_custom_path {
        if !Path::new(path).is_file() {
            bail!("--btf-custom-path {path}: no such file");
        }
    }
    Ok(given)
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

/// The energy meter of a run; says once which source it counts with.
pub fn energy_meter(sysfs: &Path, args: &crate::cli::EnergyArgs, plan: &Plan) -> Meter {
    let (meter, why_not_rapl) = Meter::discover(
        sysfs,
        Path::new("/proc/stat"),
        &plan.cpu_node,
        args.mode(),
        args.energy_watts,
    );
    match why_not_rapl {
        None => info!("energy: counted by RAPL (powercap)"),
        Some(why) => info!(
            "energy: estimated from busy and idle time at {} W per socket \
             (busy,C1,C3,C6), not counted: {why}",
            args.energy_watts
        ),
    }
    meter
}

impl<'a> Scheduler<'a> {
    pub fn init(
        opts: &SchedOpts,
        plan: Plan,
        devices: DeviceTable,
        learning: Option<&Learning>,
        carried: Option<&esn_controller::persist::LearnedState>,
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
        let open_opts = libbpf_opts(opts)?.into_bpf_open_opts();
        let mut skel = scx_ops_open!(builder, open_object, esn_ops, open_opts)?;
        keep_struct_ops_for_explicit_attach(&skel.maps.esn_ops);
        let rt_seen_at_switch = reenqueue_from_anywhere();
        if rt_seen_at_switch {
            skel.struct_ops.esn_ops_mut().cpu_release = std::ptr::null_mut();
            skel.progs.esn_sched_switch.set_autoload(true);
            info!("a higher class taking a CPU: seen at sched_switch (ops.cpu_release is deprecated on this kernel)");
        } else {
            info!("a higher class taking a CPU: seen by ops.cpu_release");
        }
        skel.struct_ops.esn_ops_mut().exit_dump_len = opts.exit_dump_len;
        // 0 asks for the kernel's default, which is also its maximum.
        let watchdog_timeout_ms = match skel.struct_ops.esn_ops_mut().timeout_ms {
            0 => WATCHDOG_DEFAULT_MS,
            ms => ms as u64,
        };

        let rodata = skel
            .maps
            .rodata_data
            .as_mut()
            .context("BPF object has no rodata")?;
        rodata.slice_ns = opts.slice_us * 1000;
        rodata.io_min_score = opts.io_min_score;
        rodata.ioprio_rt_boost = opts.ioprio_rt_boost;
        rodata.ioprio_idle_penalty = opts.ioprio_idle_penalty;
        rodata.io_half_life_ns = opts.io_half_life_ms * 1_000_000;
        rodata.io_idle_ns = opts.io_idle_ms * 1_000_000;
        rodata.io_steal_after_ns = opts.io_steal_after_ms * 1_000_000;
        rodata.io_preempt_after_ns = opts.io_preempt_after_us * 1000;
        rodata.fair_preempt = !opts.no_fair_preempt;
        rodata.fair_preempt_after_ns = opts.fair_preempt_after_us * 1000;
        rodata.keep_idle_nodes = !opts.no_keep_idle_nodes;
        rodata.rt_seen_at_switch = rt_seen_at_switch;
        rodata.smt_active = esn_topology::smt_active(&opts.sysfs);
        rodata.nr_nodes = plan.nr_nodes;
        rodata.start_at_insert = hooks.starts_at_insert();
        rodata.has_path_disks = plan.devices.iter().any(|d| !d.paths.is_empty());
        for (slot, &node) in rodata.cpu_node.iter_mut().zip(&plan.cpu_node) {
            *slot = node;
        }
        for (node, &has) in plan.node_has_cpus.iter().enumerate() {
            rodata.node_has_cpus[node] = has as u8;
            rodata.node_cpus_nr[node] = plan.node_cpus[node];
            rodata.spill_order[node] = plan.spill_row(node);
        }

        blkobs::apply_hooks(skel.open_object_mut(), &hooks, false);

        let mut skel = scx_ops_load!(skel, esn_ops, uei)?;

        let mut thresholds = plan.thresholds.clone();
        let mut control = None;
        if let Some(learning) = learning {
            let maps = blkobs_maps_of(&skel, opts.io_half_life_ms * 1_000_000);
            let c = Control::new(
                &plan,
                &learning.config,
                learning.state_file.clone(),
                control::topology_fingerprint(&plan),
                maps.io_counters()?,
                node_waits(&read_node_sched(&skel, plan.nr_nodes)?),
                carried,
            )?;
            for (node, limit) in c.initial_thresholds() {
                thresholds[node as usize] = limit;
            }
            if c.is_empty() {
                info!("no block device with a known node: no threshold to learn");
            }
            control = Some(c);
        }
        for (node, &limit) in thresholds.iter().enumerate() {
            skel.maps
                .node_threshold
                .update(
                    &(node as u32).to_ne_bytes(),
                    &limit.to_ne_bytes(),
                    MapFlags::ANY,
                )
                .with_context(|| format!("setting the threshold of node {node}"))?;
        }
        // The same table, so the same local nodes, as the reports and observe.
        crate::blkobs::register_devices(&skel.maps.dev_home_node, &devices)?;
        for dev in &plan.devices {
            crate::blkobs::register_paths(
                &skel.maps.path_disk_dev,
                dev.paths.iter().map(|p| (p.as_str(), dev.dev.0)),
            )?;
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
            "scx_esn attached: {} node(s), thresholds {:?} ({})",
            plan.nr_nodes,
            thresholds,
            match &control {
                Some(c) if !c.is_empty() => "learned live",
                Some(_) => "nothing to learn",
                None => "pinned",
            }
        );
        let energy = energy_meter(&opts.sysfs, &opts.energy, &plan);
        Ok(Scheduler {
            skel,
            link: Some(link),
            plan,
            devices,
            io_half_life_ns: opts.io_half_life_ms * 1_000_000,
            thresholds,
            control,
            control_every: learning.map_or(Duration::MAX, |l| l.interval),
            watchdog_timeout_ms,
            issue_hook: blkobs::IssueHook::new(&hooks),
            energy,
        })
    }

    /// What the controller has learned so far (nothing when pinned).
    pub fn learned(&self) -> Option<esn_controller::persist::LearnedState> {
        self.control.as_ref().map(Control::export)
    }

    fn read_counters(&self) -> Result<Counters> {
        let maps = self.blkobs_maps();
        let mut out: Counters = [0; counters::NAMES.len()];
        for (slot, &stat) in out.iter_mut().zip(Stat::ALL.iter()) {
            *slot = maps.stat(stat)?;
        }
        Ok(out)
    }

    fn read_node_sched(&self) -> Result<Vec<NodeSched>> {
        read_node_sched(&self.skel, self.plan.nr_nodes)
    }

    /// BPF's nr_placed, indexed by node.
    fn nr_placed(&self) -> Vec<u32> {
        let bss = self.skel.maps.bss_data.as_ref();
        (0..self.plan.nr_nodes as usize)
            .map(|node| bss.map(|b| b.nr_placed[node]).unwrap_or(0))
            .collect()
    }

    /// The loop's regular look at the kernel: the issue hook, --dvfs, and
    /// the controller's count of placed tasks (a mean over these samples).
    fn sample(&mut self, now: Instant, dvfs: &mut Option<esn_power::dvfs::Dvfs>) -> Result<()> {
        self.issue_hook.poll(
            self.skel.object(),
            &blkobs_maps_of(&self.skel, self.io_half_life_ns),
        )?;
        // A limit that cannot be written turns --dvfs off (with the limits
        // put back), never the scheduler.
        if let Some(err) = dvfs.as_mut().and_then(|d| d.tick(now).err()) {
            warn!("{err:#}; --dvfs is off from now on");
            *dvfs = None;
        }
        let placed = self.nr_placed();
        if let Some(control) = self.control.as_mut() {
            control.tick(&placed);
        }
        Ok(())
    }

    /// The pass's reading, taken by its first reader; a failed one is not
    /// kept, so the next reader tries again.
    fn pass_reading(
        &self,
        taken: &mut Option<Arc<Cumulative>>,
        aged_out: u64,
    ) -> Result<Arc<Cumulative>> {
        if let Some(reading) = taken {
            return Ok(reading.clone());
        }
        let reading = Arc::new(self.cumulative(aged_out)?);
        *taken = Some(reading.clone());
        Ok(reading)
    }

    /// One controller step; the thresholds it changed go to BPF at once.
    fn control_step(&mut self) -> Result<()> {
        let io = self.blkobs_maps().io_counters()?;
        let waits = node_waits(&self.read_node_sched()?);
        let Some(control) = self.control.as_mut() else {
            return Ok(());
        };
        for d in control.step(io, waits) {
            let node = d.node as usize;
            if self.thresholds.get(node) == Some(&d.threshold) {
                continue;
            }
            self.skel
                .maps
                .node_threshold
                .update(
                    &d.node.to_ne_bytes(),
                    &d.threshold.to_ne_bytes(),
                    MapFlags::ANY,
                )
                .with_context(|| format!("setting the threshold of node {node}"))?;
            if d.exploring {
                log::debug!("node {node}: exploring threshold {}", d.threshold);
            }
            self.thresholds[node] = d.threshold;
        }
        Ok(())
    }

    /// Placed tasks and threshold of each node with CPUs, now.
    fn gauges(&self) -> Vec<NodeGauge> {
        let placed = self.nr_placed();
        self.plan
            .node_has_cpus
            .iter()
            .enumerate()
            .filter(|(_, &has)| has)
            .map(|(node, _)| NodeGauge {
                node: node as u32,
                cpus: self.plan.node_cpus[node],
                placed: placed[node],
                threshold: self.thresholds[node],
            })
            .collect()
    }

    /// Everything counted since start, for an interval's difference.
    fn cumulative(&self, aged_out: u64) -> Result<Cumulative> {
        let cpu = cpustat::read(&self.plan.cpu_node, self.plan.nr_nodes as usize);
        Ok(Cumulative {
            counters: self.read_counters()?,
            sched: self.read_node_sched()?,
            energy: Some(self.energy.read_with_ticks(&cpu)),
            cpu,
            watchdog_timeout_ms: self.watchdog_timeout_ms,
            io: self.io_snapshot(aged_out)?,
            nodes: self.gauges(),
            decisions: self
                .control
                .as_ref()
                .map(|c| c.decisions().to_vec())
                .unwrap_or_default(),
        })
    }

    fn blkobs_maps(&self) -> BlkObsMaps<'_> {
        blkobs_maps_of(&self.skel, self.io_half_life_ns)
    }

    /// The block I/O report `scx_esn observe` prints, from the scheduler's
    /// own copy of the same BPF tables.
    fn io_snapshot(&self, aged_out: u64) -> Result<RawSnapshot> {
        let mut snap = self.blkobs_maps().snapshot(
            self.plan.nr_nodes,
            blkobs::object_cost(self.skel.object()),
            aged_out,
        )?;
        snap.io_ticks_ms = blkobs::read_io_ticks(&self.devices);
        Ok(snap)
    }

    /// Run until `shutdown` is set or the kernel unloads the scheduler.
    /// `stats_every` prints an interval (`json`: as one JSON line); readers
    /// of the stats socket and scrapes of `--prometheus` are answered within
    /// one sample period (100 ms).
    ///
    /// Each pass of the loop sleeps until the next job is due, runs the jobs
    /// that are due (each [`Every`]: once after a stall, never in a burst),
    /// then answers every reader waiting with one reading of the maps shared
    /// by all of them. The controller's step reads only what it weighs (the
    /// I/O counters and the waits, not the task table).
    pub fn run(
        &mut self,
        shutdown: &AtomicBool,
        stats_every: Option<Duration>,
        json: bool,
        exporter: Option<&crate::prom::Exporter>,
        stats_access: &socket::SocketAccess,
        dvfs: &mut Option<esn_power::dvfs::Dvfs>,
    ) -> Result<UserExitInfo> {
        let mut aged_out = 0;
        let start = Arc::new(self.cumulative(aged_out)?);
        let mut last_stats = start.clone();
        let server = socket::try_launch(self.devices.clone(), stats_access);
        let t0 = Instant::now();
        let mut sample = Every::new(SAMPLE_EVERY, t0);
        let mut print_stats = stats_every.map(|d| Every::new(d, t0));
        let mut aging = Every::new(INFLIGHT_AGING_EVERY, t0);
        let mut control_step = self
            .control
            .is_some()
            .then(|| Every::new(self.control_every, t0));
        let mut save = Every::new(STATE_SAVE_EVERY, t0);
        let mut energy_keep_up = Every::new(energy::KEEP_UP_EVERY, t0);
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            // The sample period bounds the wait: shutdown and the kernel's
            // exit are noticed within it.
            let until = [print_stats, control_step]
                .into_iter()
                .flatten()
                .chain([aging, save, energy_keep_up])
                .map(|e| e.next())
                .fold(sample.next(), Instant::min);
            // A plain sleep, not a blocking select on the readers' channels:
            // crossbeam's select spins and yields before it parks, which
            // burned ~90 % of a CPU in the TCG VM (1071 ticks against 275
            // over the same 17 s); a reader waits at most one sample period.
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            let now = Instant::now();
            if sample.due(now) {
                self.sample(now, dvfs)?;
            }
            if control_step.as_mut().is_some_and(|e| e.due(now)) {
                self.control_step()?;
            }
            if save.due(now) {
                if let Some(control) = self.control.as_mut() {
                    control.save();
                }
            }
            // Readers may be minutes apart; a RAPL counter must not wrap
            // twice between two readings of the meter.
            if energy_keep_up.due(now) {
                self.energy.read();
            }
            if aging.due(now) {
                aged_out += self
                    .blkobs_maps()
                    .age_inflight(blkobs::INFLIGHT_MAX_AGE.as_nanos() as u64)?;
            }

            // One reading of the maps for every reader of this pass.
            let mut pass_reading = None;
            // Monitoring never stops the scheduler: a reading that fails is
            // logged and its reader gets an error (stats: none within 5 s).
            if let Some(server) = &server {
                for _ in 0..server.wanted() {
                    match self.pass_reading(&mut pass_reading, aged_out) {
                        Ok(now) => server.reply(Reading {
                            start: start.clone(),
                            now,
                        }),
                        Err(err) => warn!("a stats reader gets no reading: {err:#}"),
                    }
                }
            }
            if let Some(exporter) = exporter {
                exporter.answer(|| self.pass_reading(&mut pass_reading, aged_out));
            }
            if print_stats.as_mut().is_some_and(|e| e.due(now)) {
                let now = self.pass_reading(&mut pass_reading, aged_out)?;
                let printed = socket::print(
                    &esn_reading::interval(&last_stats, &now, &self.devices),
                    json,
                );
                match printed {
                    // `scx_esn --stats 1 | head`: stop as on SIGINT,
                    // unloaded and with what was learned saved.
                    Err(err) if crate::output::is_closed(&err) => {
                        info!("standard output closed: stopping");
                        break;
                    }
                    other => other?,
                }
                last_stats = now;
            }
        }
        // Dropping the link detaches the struct_ops: the kernel switches
        // every task back to the fair class before we read the exit info.
        self.link.take();
        info!("scx_esn detached");
        if let Some(control) = self.control.as_mut() {
            control.save();
        }
        uei_report!(&self.skel, uei)
    }
}

/// The maps blkobs.bpf.h defines, in the scheduler's object.
fn blkobs_maps_of<'s>(skel: &'s BpfSkel<'_>, io_half_life_ns: u64) -> BlkObsMaps<'s> {
    BlkObsMaps {
        io_half_life_ns,
        inflight: &skel.maps.inflight,
        io_hists: &skel.maps.io_hists,
        io_slots: &skel.maps.io_slots,
        dev_home_node: &skel.maps.dev_home_node,
        node_io: &skel.maps.node_io,
        task_io: &skel.maps.task_io,
        stats: &skel.maps.stats,
    }
}

/// Cumulative per-node scheduling records, indexed by node.
fn read_node_sched(skel: &BpfSkel<'_>, nr_nodes: u32) -> Result<Vec<NodeSched>> {
    let mut out = vec![NodeSched::default(); nr_nodes as usize];
    for (node, sum) in out.iter_mut().enumerate() {
        let per_cpu = skel
            .maps
            .node_sched
            .lookup_percpu(&(node as u32).to_ne_bytes(), MapFlags::ANY)
            .context("reading the node_sched map")?
            .unwrap_or_default();
        for value in &per_cpu {
            sum.merge(&node_sched_of(&blkobs::read_pod(value)?));
        }
    }
    Ok(out)
}

/// One CPU's `struct esn_node_sched`.
fn node_sched_of(v: &bpf_intf::esn_node_sched) -> NodeSched {
    let mut s = NodeSched {
        waits: NodeWaits {
            io_waits: v.io_waits,
            io_wait_ns: v.io_wait_ns,
            fair_waits: v.fair_waits,
            fair_wait_ns: v.fair_wait_ns,
            io_idle_waits: v.io_idle_waits,
            io_idle_wait_ns: v.io_idle_wait_ns,
        },
        spill_in: v.spill_in,
        spill_out: v.spill_out,
        stolen_from: v.stolen_from,
        ..Default::default()
    };
    for (slot, &n) in s.wait_hist.slots.iter_mut().zip(v.wait_slots.iter()) {
        *slot = n;
    }
    s
}

/// The waits alone, what the controller weighs.
fn node_waits(sched: &[NodeSched]) -> Vec<NodeWaits> {
    sched.iter().map(|s| s.waits).collect()
}

/// SIGINT/SIGTERM set the flag; the loop notices within 100 ms.
pub fn shutdown_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    ctrlc::set_handler(move || set.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;
    Ok(flag)
}
