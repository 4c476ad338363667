// SPDX-License-Identifier: GPL-2.0-only
//! `esn-callprof`: how long each call of a sched_ext scheduler's callbacks
//! takes, median and tail, for the callback benchmark (issue 16).
//!
//! ```text
//!   /proc/PID/fdinfo ─► the BPF programs PID holds ─► the struct_ops ones
//!   whose callback is asked for (esn_running, bpfland_running -> running)
//!   ─► per program: open bpf/callprof.bpf.c, point its fentry and fexit at
//!      the program (set_attach_target), load, attach
//!   ─► every call: fentry notes the time on its CPU, fexit counts the
//!      duration in a per-CPU log-linear histogram (slots.rs)
//!   ─► after --duration (or SIGINT/SIGTERM): detach, sum the CPUs, print
//!      one line per callback: calls, mean, p10, p50, p90, p99 in ns
//!   first, the floor: the same pair aimed at an empty program of its own,
//!   run 20000 times by BPF_PROG_TEST_RUN (the profiler's share of a figure)
//! ```
//!
//! A test instrument (tests/callprof), not part of scx_esn. The kernel's bpf
//! stats, which issue 16's target is stated in, give only the mean, and
//! under single-threaded TCG a few calls that a vCPU switch lands in decide
//! a window's mean; the median is what the code costs. The profiler's own
//! programs run inside the profiled call, so the kernel's stats of a
//! scheduler are read outside the windows it is attached in.

mod slots;

use std::collections::BTreeSet;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use libbpf_rs::btf::{BtfType, TypeId};
use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions};
use libbpf_rs::{
    Btf, Link, MapCore, MapFlags, Object, ObjectBuilder, OpenObject, Program, ProgramInput,
    ProgramType,
};

/// The profiler's BPF object, opened once per callback program.
const CALLPROF_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/callprof.bpf.o"));

/// The profiler's programs in CALLPROF_OBJ (bpf/callprof.bpf.c).
const PROFILER_PROGS: [&str; 2] = ["call_entered", "call_returned"];

/// The empty program in CALLPROF_OBJ, the floor's target.
const EMPTY_PROG: &str = "empty_call";

/// The callbacks issue 16 sets a per-call target for.
const DEFAULT_CALLBACKS: &str = "select_cpu,enqueue,dispatch,running,stopping,runnable";

/// Time every call of a running sched_ext scheduler's callbacks and print,
/// per callback, the calls and their duration's mean, 10th, 50th, 90th and
/// 99th percentile in ns (one tab-separated line each after a `#` header),
/// after a first line `floor`: the same figures for an empty BPF program,
/// run 20000 times with the profiler on it, which is the profiler's own
/// share of every figure.
///
/// The durations are fentry to fexit on the scheduler's BPF programs: the
/// program's body and the kfuncs it calls, plus a constant of the
/// profiler's own (two clock reads and the trampoline), the same for every
/// scheduler on one machine. While attached, the profiler's programs add to
/// the profiled programs' run time in the kernel's bpf stats. Exit 1 when
/// it cannot attach (not root, PID gone or no sched_ext callbacks, a kernel
/// without fentry on BPF programs), 2 on bad arguments.
#[derive(Parser, Debug)]
#[command(name = "esn-callprof", version)]
struct Opts {
    /// The scheduler's process (scx_esn, scx_bpfland, ...): its struct_ops
    /// programs are the ones profiled.
    #[arg(long)]
    pid: u32,

    /// Seconds to profile for; 0 profiles until SIGINT or SIGTERM.
    #[arg(long, default_value_t = 5)]
    duration: u64,

    /// The callbacks to profile, comma-separated (a program's callback is
    /// its name after the scheduler's prefix: esn_running -> running).
    #[arg(long, default_value = DEFAULT_CALLBACKS, value_delimiter = ',')]
    callbacks: Vec<String>,
}

/// One callback program of the scheduler.
struct Target {
    callback: String,
    /// The program's full name (its BTF function; the kernel keeps only 15
    /// characters as the program's name).
    name: String,
    id: u32,
}

/// A loaded and attached profiler for one target.
struct Profiler {
    target: Target,
    object: Object,
    links: Vec<Link>,
}

/// The ids of the BPF programs whose fds `pid` holds.
fn prog_ids_of(pid: u32) -> Result<BTreeSet<u32>> {
    let dir = format!("/proc/{pid}/fdinfo");
    let entries = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {dir}: is process {pid} running?"))?;
    let mut ids = BTreeSet::new();
    for entry in entries.flatten() {
        // An fd closed meanwhile is simply not one of them.
        let Ok(info) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        if let Some(id) = info
            .lines()
            .find_map(|line| line.strip_prefix("prog_id:"))
            .and_then(|v| v.trim().parse().ok())
        {
            ids.insert(id);
        }
    }
    Ok(ids)
}

/// The callback a program name stands for: the name after the scheduler's
/// prefix, as callback_ab.py reads it.
fn callback_of(name: &str) -> &str {
    name.split_once('_').map_or(name, |(_, rest)| rest)
}

/// A program's full name from its BTF, or None without BTF function info.
fn full_name(id: u32, func_type_id: Option<u32>) -> Option<String> {
    let btf = Btf::from_prog_id(id).ok()?;
    let ty = btf.type_by_id::<BtfType<'_>>(TypeId::from(func_type_id?))?;
    Some(ty.name()?.to_string_lossy().into_owned())
}

/// The struct_ops programs of `pid` whose callback is one of `callbacks`.
fn find_targets(pid: u32, callbacks: &[String]) -> Result<Vec<Target>> {
    let ids = prog_ids_of(pid)?;
    let opts = ProgInfoQueryOptions::default().include_func_info(true);
    let mut targets = Vec::new();
    for info in ProgInfoIter::with_query_opts(opts) {
        if !ids.contains(&info.id) || info.ty != ProgramType::StructOps {
            continue;
        }
        let name = full_name(info.id, info.func_info.first().map(|f| f.type_id))
            .unwrap_or_else(|| info.name.to_string_lossy().into_owned());
        let callback = callback_of(&name).to_string();
        if callbacks.contains(&callback) {
            targets.push(Target {
                callback,
                name,
                id: info.id,
            });
        }
    }
    if targets.is_empty() {
        bail!(
            "process {pid} holds no struct_ops program for {}: is it a sched_ext scheduler, and has it attached?",
            callbacks.join(", ")
        );
    }
    targets.sort_by(|a, b| a.callback.cmp(&b.callback));
    Ok(targets)
}

/// Load the profiler's object aimed at `target` and attach both programs.
fn attach(target: Target) -> Result<Profiler> {
    let what = format!("{} (BPF program id {})", target.name, target.id);
    let target_fd = Program::fd_from_id(target.id)
        .with_context(|| format!("opening {what}: did the scheduler exit?"))?;
    attach_to(target, target_fd.as_fd(), &what)
}

/// CALLPROF_OBJ opened with only the programs named in `keep` to be
/// loaded. scx/common.bpf.h brings a program of its own (an fentry on the
/// scheduler's registration, for schedulers), which is never among them.
fn open_keeping(keep: &[&str]) -> Result<OpenObject> {
    let mut open = ObjectBuilder::default()
        .open_memory(CALLPROF_OBJ)
        .context("opening the profiler's BPF object")?;
    for mut prog in open.progs_mut() {
        if !keep.contains(&prog.name().to_string_lossy().as_ref()) {
            prog.set_autoload(false);
        }
    }
    Ok(open)
}

/// Load the profiler's object aimed at the program `target_fd` and attach
/// both programs.
fn attach_to(target: Target, target_fd: BorrowedFd<'_>, what: &str) -> Result<Profiler> {
    let mut open = open_keeping(&PROFILER_PROGS)?;
    for mut prog in open.progs_mut() {
        if PROFILER_PROGS.contains(&prog.name().to_string_lossy().as_ref()) {
            prog.set_attach_target(target_fd.as_raw_fd(), Some(target.name.clone()))
                .with_context(|| format!("aiming the profiler at {what}"))?;
        }
    }
    let object = open.load().with_context(|| {
        format!("loading the profiler for {what}: the kernel needs fentry/fexit on BPF programs (BPF JIT, BTF)")
    })?;
    let slots = call_slots(&object)?;
    if slots.max_entries() as usize != slots::SLOTS {
        bail!(
            "the profiler's histogram has {} slots, this loader reads {}: rebuild both together",
            slots.max_entries(),
            slots::SLOTS
        );
    }
    let mut links = Vec::new();
    for prog in object
        .progs_mut()
        .filter(|p| PROFILER_PROGS.contains(&p.name().to_string_lossy().as_ref()))
    {
        links.push(
            prog.attach_trace()
                .with_context(|| format!("attaching the profiler to {what}"))?,
        );
    }
    Ok(Profiler {
        target,
        object,
        links,
    })
}

/// Calls of the empty program per floor measurement: a few hundred
/// milliseconds under TCG.
const FLOOR_CALLS: u32 = 20_000;

/// The profiler's own cost: aimed at an empty program (EMPTY_PROG), which
/// runs FLOOR_CALLS times through BPF_PROG_TEST_RUN.
fn measure_floor() -> Result<slots::Summary> {
    let empty = open_keeping(&[EMPTY_PROG])?
        .load()
        .context("loading the empty program the floor is measured on")?;
    let prog = empty
        .progs_mut()
        .find(|p| p.name() == EMPTY_PROG)
        .context("the profiler's object has no empty program")?;
    let target = Target {
        callback: "floor".into(),
        name: EMPTY_PROG.into(),
        id: 0,
    };
    let profiler = attach_to(target, prog.as_fd(), "the empty program")?;
    for _ in 0..FLOOR_CALLS {
        prog.test_run(ProgramInput::default())
            .context("running the empty program (BPF_PROG_TEST_RUN)")?;
    }
    let Profiler { object, links, .. } = profiler;
    drop(links);
    slots::summarize(&read_histogram(&object)?)
        .context("the profiler counted none of the empty program's runs")
}

fn call_slots(object: &Object) -> Result<libbpf_rs::Map<'_>> {
    object
        .maps()
        .find(|m| m.name() == "call_slots")
        .context("the profiler's object has no call_slots map")
}

/// The histogram, summed over the CPUs.
fn read_histogram(object: &Object) -> Result<Vec<u64>> {
    let map = call_slots(object)?;
    let mut counts = vec![0u64; slots::SLOTS];
    for (slot, count) in counts.iter_mut().enumerate() {
        let key = (slot as u32).to_ne_bytes();
        let per_cpu = map
            .lookup_percpu(&key, MapFlags::ANY)
            .with_context(|| format!("reading histogram slot {slot}"))?
            .unwrap_or_default();
        *count = per_cpu
            .iter()
            .filter_map(|v| v.get(..8).and_then(|b| b.try_into().ok()))
            .map(u64::from_ne_bytes)
            .sum();
    }
    Ok(counts)
}

fn run(opts: &Opts) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("needs root (attaching tracing programs to another process's BPF): run it with sudo");
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;

    // Each step's time on stderr: under load, loading and attaching take
    // seconds, which the caller's load must outlast.
    let began = Instant::now();
    let step = |what: &str| {
        eprintln!(
            "esn-callprof: {what} at {:.1} s",
            began.elapsed().as_secs_f64()
        )
    };
    let targets = find_targets(opts.pid, &opts.callbacks)?;
    step("found the callbacks");
    let floor = measure_floor()?;
    step("measured the floor");
    let mut profilers = Vec::new();
    for target in targets {
        profilers.push(attach(target)?);
        step(&format!(
            "attached to {}",
            profilers[profilers.len() - 1].target.name
        ));
    }
    let started = Instant::now();
    let until = (opts.duration > 0).then(|| started + Duration::from_secs(opts.duration));
    while !shutdown.load(Ordering::Relaxed) && until.is_none_or(|t| Instant::now() < t) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let seconds = started.elapsed().as_secs_f64();
    for profiler in &mut profilers {
        profiler.links.clear();
    }

    println!(
        "# callback\tprogram\tcalls\tmean_ns\tp10_ns\tp50_ns\tp90_ns\tp99_ns\t({seconds:.1} s)"
    );
    print_summary("floor", EMPTY_PROG, &floor);
    for profiler in &profilers {
        if let Some(s) = slots::summarize(&read_histogram(&profiler.object)?) {
            print_summary(&profiler.target.callback, &profiler.target.name, &s);
        }
    }
    Ok(())
}

fn print_summary(callback: &str, program: &str, s: &slots::Summary) {
    println!(
        "{callback}\t{program}\t{}\t{:.0}\t{:.0}\t{:.0}\t{:.0}\t{:.0}",
        s.calls, s.mean_ns, s.p10_ns, s.p50_ns, s.p90_ns, s.p99_ns
    );
}

fn main() -> ExitCode {
    let opts = Opts::parse();
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("esn-callprof: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_are_named_after_the_prefix() {
        assert_eq!(callback_of("esn_running"), "running");
        assert_eq!(callback_of("bpfland_select_cpu"), "select_cpu");
        assert_eq!(callback_of("plain"), "plain");
    }

    #[test]
    fn a_missing_process_is_a_clear_error() {
        // pid_max is at most 2^22: this pid cannot exist.
        let err = prog_ids_of(u32::MAX).unwrap_err();
        assert!(format!("{err:#}").contains("is process"), "{err:#}");
    }
}
