// SPDX-License-Identifier: GPL-2.0-only
//! `esn-scx-floor`: what running under sched_ext costs by itself, for the
//! benchmark.
//!
//! ```text
//!   open bpf/floor_sched.bpf.c (no scheduling callbacks) ─► load ─► attach
//!   ─► one line "esn-scx-floor: attached ..." on stdout
//!   ─► the kernel's built-in policy schedules every task: idle CPU at
//!      wake-up, else the global FIFO queue (one per NUMA node since 6.12,
//!      served only by its node's CPUs); no BPF runs per event
//!   ─► SIGINT/SIGTERM ─► detach, exit 0
//!   ─► the kernel unloads it (error, stall) ─► its reason on stderr, exit 1
//! ```
//!
//! A test instrument (tests/floor), not part of scx_esn. The benchmark runs it
//! as the scheduler `floor` beside EEVDF, scx_esn and the peers in one boot:
//! its figures against EEVDF's are the floor that no sched_ext scheduler gets
//! below on that machine, and scx_esn's against its figures are what scx_esn's
//! own policy and BPF add.

mod floor_skel;

use std::mem::MaybeUninit;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use libbpf_rs::OpenObject;
use scx_utils::libbpf_clap_opts::LibbpfOpts;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};

use floor_skel::*;

/// Load the sched_ext floor: a sched_ext scheduler that implements no
/// scheduling callback, so that the kernel's built-in policy (an idle CPU at
/// wake-up, else the global FIFO queue of the task's node) schedules every
/// task without running any BPF.
///
/// Prints one line once attached and stays until SIGINT or SIGTERM, then
/// unloads and exits 0. Exit 1 when it cannot load (not root, no sched_ext,
/// another sched_ext scheduler attached) or when the kernel unloads it (the
/// reason on stderr), 2 on bad arguments.
#[derive(Parser, Debug)]
#[command(name = "esn-scx-floor", version)]
struct Opts {}

fn run() -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("needs root (loading a sched_ext scheduler): run it with sudo");
    }
    if !std::path::Path::new("/sys/kernel/sched_ext").exists() {
        bail!("this kernel has no sched_ext (/sys/kernel/sched_ext is missing): boot 6.12 or later with CONFIG_SCHED_CLASS_EXT=y");
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;

    let mut open_object = MaybeUninit::<OpenObject>::uninit();
    let builder = FloorSkelBuilder::default();
    let open_opts = LibbpfOpts::default().into_bpf_open_opts();
    let mut skel = scx_ops_open!(builder, &mut open_object, floor_ops, open_opts)?;
    let mut skel = scx_ops_load!(skel, floor_ops, uei)?;
    let link = scx_ops_attach!(skel, floor_ops)?;
    println!(
        "esn-scx-floor: attached (no callbacks: built-in idle pick, the global FIFO per node)"
    );

    while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&skel, uei) {
        std::thread::sleep(Duration::from_millis(100));
    }
    // Dropping the link detaches the struct_ops; the exit info is final then.
    drop(link);
    uei_report!(&skel, uei).map(|_| ())
}

fn main() -> ExitCode {
    Opts::parse();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("esn-scx-floor: {err:#}");
            ExitCode::FAILURE
        }
    }
}
