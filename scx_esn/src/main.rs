// SPDX-License-Identifier: GPL-2.0-only
//! scx_esn: NUMA- and NVMe-aware sched_ext scheduler.
//!
//! `main` only wires the pieces: the CLI (`cli`), the machine's topology
//! (`esn_topology`), what BPF is told about it (`plan`), the scheduler's
//! life cycle (`sched`) and its counters (`counters`), and `--dvfs`
//! (`esn_power`).

mod blkobs;
mod bpf_intf;
mod bpf_skel;
mod cli;
mod docs;
mod every;
mod observe;
mod observe_skel;
mod output;
mod profile;
mod prom;
mod sched;
mod socket;
mod top;

use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use esn_topology::Topology;

use cli::{Command, SchedOpts};
use esn_topology::plan::Plan;

fn init_logging(verbose: u8) -> Result<()> {
    // libbpf's verifier log comes as warnings; -v shows our debug lines.
    let level = if verbose > 0 {
        simplelog::LevelFilter::Debug
    } else {
        simplelog::LevelFilter::Info
    };
    let config = simplelog::ConfigBuilder::new()
        .set_time_level(simplelog::LevelFilter::Error)
        .set_target_level(simplelog::LevelFilter::Off)
        .set_thread_level(simplelog::LevelFilter::Off)
        .set_location_level(simplelog::LevelFilter::Off)
        .build();
    simplelog::TermLogger::init(
        level,
        config,
        simplelog::TerminalMode::Stderr,
        // Auto only looks at $TERM: a log redirected to a file would get
        // escape codes.
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            simplelog::ColorChoice::Auto
        } else {
            simplelog::ColorChoice::Never
        },
    )
    .context("initialising the logger")
}

fn discover(opts: &SchedOpts) -> Result<Topology> {
    Topology::discover(&opts.sysfs)
        .with_context(|| format!("reading the topology under {}", opts.sysfs.display()))
}

fn print_topology(opts: &SchedOpts, json: bool) -> Result<()> {
    let topo = discover(opts)?;
    if json {
        output::write(&format!("{}\n", serde_json::to_string_pretty(&topo)?))
    } else {
        output::write(&topo.render_text())
    }
}

/// The kernel can run a sched_ext scheduler and none runs now: checked
/// before anything is loaded, so a refusal leaves nothing behind.
fn check_sched_ext(sysfs: &std::path::Path) -> Result<()> {
    let dir = sysfs.join("kernel/sched_ext");
    if !dir.exists() {
        bail!(
            "this kernel has no sched_ext ({} is missing): boot a kernel built with \
             CONFIG_SCHED_CLASS_EXT=y (Linux 6.12 or later); `scx_esn topology` and \
             `scx_esn observe` work without it",
            dir.display()
        );
    }
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).map(|s| s.trim().to_string());
    match read("state") {
        Ok(state) if state != "disabled" => {
            let name = read("root/ops").unwrap_or_else(|_| "unnamed".into());
            bail!(
                "another sched_ext scheduler ({name}) is {state}: stop it first (its \
                 service, e.g. `systemctl stop scx`, or its process), then start scx_esn"
            );
        }
        _ => Ok(()),
    }
}

/// Loading BPF needs root (CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON): say so
/// before the kernel answers with a bare EPERM.
fn require_root(what: &str) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("{what} needs root (it loads BPF programs into the kernel): run it with sudo");
    }
    Ok(())
}

/// The controller's settings, or `None` when --threshold pins the thresholds.
fn learning(opts: &SchedOpts) -> Result<Option<sched::Learning>> {
    let interval = cli::positive_secs("--control-interval", opts.control_interval)?;
    if opts.threshold.is_some() {
        return Ok(None);
    }
    let config = esn_controller::ControllerConfig {
        numa_penalty_override: opts.numa_penalty,
        objective: opts.objective.into(),
        ..Default::default()
    };
    if let Err(why) = config.validate() {
        bail!("controller configuration: {why}");
    }
    Ok(Some(sched::Learning {
        config,
        interval,
        state_file: (!opts.no_state).then(|| opts.state_file.clone()),
    }))
}

fn run_monitor(secs: f64, json: bool) -> Result<()> {
    let every = cli::positive_secs("--monitor", secs)?;
    let shutdown = sched::shutdown_flag()?;
    socket::monitor(every, json, shutdown)
}

fn run_scheduler(opts: &SchedOpts) -> Result<()> {
    if opts.help_stats {
        return socket::describe(&mut std::io::stdout());
    }
    if let Some(secs) = opts.monitor {
        return run_monitor(secs, opts.json);
    }
    // Everything the command line says is checked before the machine is.
    let learning = learning(opts)?;
    let stats_access = socket::SocketAccess::for_group(opts.stats_group.as_deref())?;
    let stats_every = opts
        .stats
        .map(|secs| cli::positive_secs("--stats", secs))
        .transpose()?;
    check_sched_ext(&opts.sysfs)?;
    require_root("scx_esn")?;
    let shutdown = sched::shutdown_flag()?;
    // Bound before loading: a taken port is an error now, not a silent gap
    // in the dashboards. It outlives restarts of the scheduler.
    let exporter = {
        let topo = discover(opts)?;
        let devices = Plan::new(&topo, opts.threshold)?.device_table(&topo);
        prom::launch_checked(opts.prometheus, &devices)?
    };
    // What runs, from which commit, started how: the first line of every
    // bug report, as the scx schedulers log it. Not before the refusals
    // above, each of which is one line on stderr and nothing else.
    log::info!(
        "scx_esn {} started as: {}",
        cli::FULL_VERSION,
        cli::command_line()
    );
    let mut open_object = MaybeUninit::uninit();
    let mut carried = esn_controller::live::CarriedState::default();
    let mut dvfs_said_off = false;
    loop {
        // Re-read the topology on every (re)start: a CPU hotplug restarts us.
        let topo = discover(opts)?;
        let plan = Plan::new(&topo, opts.threshold)?;
        let devices = plan.device_table(&topo);
        let fingerprint = esn_controller::live::topology_fingerprint(&plan);
        let mut scheduler = sched::Scheduler::init(
            opts,
            plan,
            devices,
            learning.as_ref(),
            carried.for_topology(&fingerprint),
            &mut open_object,
        )?;
        // Per (re)start, like the topology. Dropping it, on every way out of
        // this iteration (exit, error, reload), puts the frequency limits
        // back (`Dvfs`'s Drop, which warns if it cannot).
        let mut dvfs = start_dvfs(opts, &topo, &mut dvfs_said_off)?;
        let exit = scheduler.run(
            &shutdown,
            stats_every,
            opts.json,
            exporter.as_ref(),
            &stats_access,
            &mut dvfs,
        )?;
        if !exit.should_restart() {
            return Ok(());
        }
        if let Some(state) = scheduler.learned() {
            carried.keep(state);
        }
        log::info!("the kernel asked for a restart (CPU hotplug?): reloading");
    }
}

/// `--dvfs`: the nodes with block devices and cpufreq, or `None` (said once
/// per run, not per restart, when there is nothing to do).
fn start_dvfs(
    opts: &SchedOpts,
    topo: &Topology,
    said_off: &mut bool,
) -> Result<Option<esn_power::dvfs::Dvfs>> {
    use esn_power::dvfs::{Dvfs, DvfsConfig, NodeInput, Start};
    if !opts.dvfs {
        return Ok(None);
    }
    let nodes: Vec<NodeInput> = topo
        .nodes
        .iter()
        .map(|node| NodeInput {
            node: node.id,
            cpus: node.cpus.clone(),
            devices: topo
                .devices
                .iter()
                .filter(|d| d.home_node == Some(node.id))
                .map(|d| d.name.clone())
                .collect(),
        })
        .collect();
    let config = DvfsConfig {
        interval: std::time::Duration::from_millis(opts.dvfs_interval_ms),
        util_threshold: f64::from(opts.dvfs_util_pct) / 100.0,
        step_khz: opts.dvfs_step_mhz * 1000,
        record: opts.dvfs_record.clone(),
    };
    match Dvfs::start(&opts.sysfs, &nodes, config).context("--dvfs")? {
        Start::On(dvfs) => {
            log::info!("--dvfs: on for node(s) {:?}", dvfs.nodes());
            Ok(Some(dvfs))
        }
        Start::Off(why) => {
            if !std::mem::replace(said_off, true) {
                log::warn!("--dvfs stays off: {why}");
            }
            Ok(None)
        }
    }
}

/// `scx_esn restore-freq`: what a killed --dvfs run left lowered.
fn restore_freq(opts: &SchedOpts, record: &std::path::Path) -> Result<()> {
    require_root("scx_esn restore-freq")?;
    match esn_power::cpufreq::restore_from_record(&opts.sysfs, record)? {
        None => println!("no record at {}: no limit to put back", record.display()),
        Some(done) if done.failed.is_empty() => println!(
            "put back the CPU frequency limits of {} CPUs; removed {}",
            done.restored.len(),
            record.display()
        ),
        Some(done) => bail!(
            "put back {} CPUs' limits, not {} ({}); {} keeps them: run this again once they can be written",
            done.restored.len(),
            done.failed.len(),
            done.failures(),
            record.display()
        ),
    }
    Ok(())
}

/// `scx_esn energy`: the meter alone, over one window.
fn measure_energy(opts: &SchedOpts, energy_opts: &cli::EnergyOpts) -> Result<()> {
    let topo = discover(opts)?;
    let plan = Plan::new(&topo, None)?;
    let shutdown = sched::shutdown_flag()?;
    let meter = sched::energy_meter(&opts.sysfs, &energy_opts.energy, &plan);
    let start = meter.read();
    let until = energy_opts
        .duration
        .map(|s| start.taken + Duration::from_secs_f64(s));
    let mut keep_up = start.taken + esn_power::energy::KEEP_UP_EVERY;
    while !shutdown.load(Ordering::Relaxed) && until.is_none_or(|u| Instant::now() < u) {
        std::thread::sleep(Duration::from_millis(100));
        if Instant::now() >= keep_up {
            meter.read();
            keep_up += esn_power::energy::KEEP_UP_EVERY;
        }
    }
    let now = meter.read();
    let elapsed_s = now.taken.duration_since(start.taken).as_secs_f64();
    let e = esn_power::energy::interval(&start, &now)
        .context("no time passed between the two readings")?;
    if energy_opts.json {
        println!("{}", e.window_json(elapsed_s));
    } else {
        println!("{}", e.window_line(elapsed_s));
    }
    Ok(())
}

fn run_observer(opts: &SchedOpts, observe_opts: &cli::ObserveOpts) -> Result<()> {
    let topo = discover(opts)?;
    require_root("scx_esn observe")?;
    let shutdown = sched::shutdown_flag()?;
    observe::run(
        &topo,
        observe_opts,
        &opts.sysfs,
        opts.io_half_life_ms,
        opts.verbose,
        &shutdown,
    )
}

fn run_profile(opts: &SchedOpts, profile_opts: &cli::ProfileOpts) -> Result<()> {
    let topo = discover(opts)?;
    let shutdown = sched::shutdown_flag()?;
    profile::run(&topo, profile_opts, &shutdown)
}

fn run_top(opts: &SchedOpts, top_opts: &cli::TopOpts) -> Result<()> {
    let topo = discover(opts)?;
    let shutdown = sched::shutdown_flag()?;
    top::run(
        &topo,
        top_opts,
        &opts.sysfs,
        opts.io_half_life_ms,
        opts.verbose,
        &shutdown,
    )
}

fn main() -> ExitCode {
    let opts = cli::parse();
    if let Err(err) = init_logging(opts.sched.verbose) {
        eprintln!("scx_esn: {err:#}");
    }
    let result = match opts.command {
        Some(Command::Topology { json }) => print_topology(&opts.sched, json),
        Some(Command::Observe(ref observe_opts)) => run_observer(&opts.sched, observe_opts),
        Some(Command::Profile(ref profile_opts)) => run_profile(&opts.sched, profile_opts),
        Some(Command::Top(ref top_opts)) => run_top(&opts.sched, top_opts),
        Some(Command::Energy(ref energy_opts)) => measure_energy(&opts.sched, energy_opts),
        Some(Command::RestoreFreq { ref record }) => restore_freq(&opts.sched, record),
        Some(Command::Completions { shell }) => docs::completions(shell),
        Some(Command::Manpages { ref dir }) => docs::man_pages(dir),
        None => run_scheduler(&opts.sched),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `scx_esn ... | head`: the reader had what it wanted.
        Err(err) if output::is_closed(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // The whole chain on one line, without a backtrace: operators
            // need the reason and what to do, not our call stack.
            eprintln!("scx_esn: {err:#}");
            ExitCode::FAILURE
        }
    }
}
