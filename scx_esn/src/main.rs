// SPDX-License-Identifier: GPL-2.0-only
//! scx_esn: NUMA- and NVMe-aware sched_ext scheduler.
//!
//! `main` only wires the pieces: the CLI (`cli`), the machine's topology
//! (`esn_topology`), what BPF is told about it (`plan`), the scheduler's
//! life cycle (`sched`) and its counters (`counters`).

mod blkobs;
mod bpf_intf;
mod bpf_skel;
mod cli;
mod control;
mod counters;
mod cpustat;
mod observe;
mod observe_skel;
mod output;
mod plan;
mod profile;
mod prom;
mod sched;
mod stats;
mod top;

use std::mem::MaybeUninit;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use esn_topology::Topology;

use cli::{Command, Opts, SchedOpts};
use plan::Plan;

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

fn check_sched_ext() -> Result<()> {
    if !std::path::Path::new("/sys/kernel/sched_ext").exists() {
        bail!(
            "this kernel has no sched_ext (/sys/kernel/sched_ext is missing): boot a \
             kernel built with CONFIG_SCHED_CLASS_EXT=y (Linux 6.12 or later); \
             `scx_esn topology` works without it"
        );
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
    stats::monitor(every, json, shutdown)
}

fn run_scheduler(opts: &SchedOpts) -> Result<()> {
    if opts.help_stats {
        return stats::describe(&mut std::io::stdout());
    }
    if let Some(secs) = opts.monitor {
        return run_monitor(secs, opts.json);
    }
    let learning = learning(opts)?;
    check_sched_ext()?;
    let stats_every = opts
        .stats
        .map(|secs| cli::positive_secs("--stats", secs))
        .transpose()?;
    let shutdown = sched::shutdown_flag()?;
    // Bound before loading: a taken port is an error now, not a silent gap
    // in the dashboards. It outlives restarts of the scheduler.
    let exporter = prom::launch_checked(opts.prometheus, &blkobs::device_table(&discover(opts)?))?;
    let mut open_object = MaybeUninit::uninit();
    loop {
        // Re-read the topology on every (re)start: a CPU hotplug restarts us.
        let topo = discover(opts)?;
        let plan = Plan::new(&topo, opts.threshold)?;
        let devices = blkobs::device_table(&topo);
        let mut scheduler =
            sched::Scheduler::init(opts, plan, devices, learning.as_ref(), &mut open_object)?;
        let exit = scheduler.run(&shutdown, stats_every, opts.json, exporter.as_ref())?;
        if !exit.should_restart() {
            return Ok(());
        }
        log::info!("the kernel asked for a restart (CPU hotplug?): reloading");
    }
}

fn run_observer(opts: &SchedOpts, observe_opts: &cli::ObserveOpts) -> Result<()> {
    let topo = discover(opts)?;
    let shutdown = sched::shutdown_flag()?;
    observe::run(
        &topo,
        observe_opts,
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
        opts.io_half_life_ms,
        opts.verbose,
        &shutdown,
    )
}

fn main() -> ExitCode {
    let opts = Opts::parse();
    if let Err(err) = init_logging(opts.sched.verbose) {
        eprintln!("scx_esn: {err:#}");
    }
    let result = match opts.command {
        Some(Command::Topology { json }) => print_topology(&opts.sched, json),
        Some(Command::Observe(ref observe_opts)) => run_observer(&opts.sched, observe_opts),
        Some(Command::Profile(ref profile_opts)) => run_profile(&opts.sched, profile_opts),
        Some(Command::Top(ref top_opts)) => run_top(&opts.sched, top_opts),
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
