// SPDX-License-Identifier: GPL-2.0-only
//! `esn-remote-penalty`: the NUMA lab's interconnect, for a VM that has none.
//!
//! ```text
//!   topology (sysfs) ─► disks with a home node ─► spin per disk node
//!        --us N                        N us at the nearest other node
//!        --factor F   calibrate.rs ─►  F x local - remote (measured, lab off)
//!   ─► scaled by distance (plan.rs) ─► spin map ─► load ─► attach
//!        fexit/blk_mq_start_request, else tp_btf/block_rq_issue
//!   ─► --factor: 3 times, measure again with the spin on and correct the spin
//!      map (refine)
//!   ─► one line "remote-penalty: active ..." on stdout
//!   ─► SIGINT/SIGTERM ─► detach, one line of counts on stderr, exit 0
//! ```
//!
//! A test instrument (tests/lab), not part of scx_esn: see bpf/lab_penalty.bpf.c for
//! why the spin sits where it does. Run as root; `tests/lab/remote-penalty` is the
//! entry point the tests and the benchmark use.

mod calibrate;
mod lab_skel;
mod plan;

use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use esn_topology::Topology;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use lab_skel::*;
use plan::LabDisk;

/// Make block requests submitted from a CPU on another NUMA node than their disk's
/// slower, by spinning on the submitting CPU inside the request's service time.
///
/// Off unless running: prints one line once active, stays until SIGINT or SIGTERM,
/// then removes itself and exits 0. Exit 1 when it cannot start (no disk with a
/// home node, one node, not root), 2 on bad arguments.
#[derive(Parser, Debug)]
#[command(name = "remote-penalty", version)]
#[command(group(clap::ArgGroup::new("penalty").required(true).args(["us", "factor"])))]
struct Opts {
    /// Spin N microseconds on every remote request (from the nearest other node;
    /// farther nodes pay more in proportion to their NUMA distance minus 10).
    #[arg(long, value_name = "N")]
    us: Option<f64>,

    /// Make a remote 4k direct read take F times a local one (2.0: the research's
    /// machine; 1.05: a NAND SSD one hop away). Calibrated first: the disk is read
    /// from the CPUs of its node and of the nearest node, lab off, then again with
    /// the spin in place.
    #[arg(long, value_name = "F")]
    factor: Option<f64>,

    /// Only this disk (repeatable); default: every disk with a known home node.
    #[arg(long, value_name = "NAME")]
    device: Vec<String>,

    /// Seconds of calibration reads for --factor, per disk node.
    #[arg(long, value_name = "SECS", default_value_t = 6.0)]
    calibrate_secs: f64,

    /// Use the block_rq_issue tracepoint even where fexit works (for testing the fallback).
    #[arg(long)]
    tracepoint: bool,

    /// Print every calibration round (latencies, and the CPU each side ended on) to stderr.
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Clone)]
struct Probe {
    disk: String,
    local_cpus: Vec<u32>,
    remote_cpus: Vec<u32>,
    ratio_off: f64,
}

/// The spin at the nearest distance for one disk node, and where it came from.
struct NodeSpin {
    node: u32,
    nearest: (u32, u32),
    spin_ns: u64,
    how: String,
    /// --factor: the disk, the local and remote CPUs, and the ratio measured with
    /// the lab off, to measure again with the spin on.
    probe: Option<Probe>,
}

fn check_args(opts: &Opts) -> Result<()> {
    if let Some(us) = opts.us {
        if !us.is_finite() || !(0.0..=100_000.0).contains(&us) {
            bail!("--us {us}: give microseconds from 0 to 100000");
        }
    }
    if let Some(f) = opts.factor {
        if !f.is_finite() || !(1.0..=20.0).contains(&f) {
            bail!("--factor {f}: give a factor from 1.0 (no penalty) to 20");
        }
    }
    if !opts.calibrate_secs.is_finite() || !(0.5..=120.0).contains(&opts.calibrate_secs) {
        bail!(
            "--calibrate-secs {}: give 0.5 to 120 seconds",
            opts.calibrate_secs
        );
    }
    Ok(())
}

/// One spin per disk node: the disks of a node share its table row.
fn spins(topo: &Topology, disks: &[LabDisk], opts: &Opts) -> Result<Vec<NodeSpin>> {
    let mut out: Vec<NodeSpin> = Vec::new();
    for disk in disks {
        if out.iter().any(|s| s.node == disk.node) {
            continue;
        }
        let Some(nearest) = plan::nearest_remote(topo, disk.node) else {
            bail!(
                "{} is on node {}, and no other node has CPUs: no request to it can be \
                 remote (boot the VM with several nodes, tests/vm)",
                disk.name,
                disk.node
            );
        };
        let mut probe = None;
        let (spin_ns, how) = match (opts.us, opts.factor) {
            (Some(us), _) => ((us * 1000.0).round() as u64, format!("--us {us}")),
            (None, Some(factor)) => {
                let local_cpus = topo
                    .node(disk.node)
                    .map(|n| n.cpus.clone())
                    .unwrap_or_default();
                if local_cpus.is_empty() {
                    bail!(
                        "{} is on node {}, which has no CPUs: there is no local latency \
                         to scale; use --us",
                        disk.name,
                        disk.node
                    );
                }
                let remote_cpus = topo
                    .node(nearest.0)
                    .map(|n| n.cpus.clone())
                    .unwrap_or_default();
                let lat = calibrate::measure(
                    &disk.name,
                    &local_cpus,
                    &remote_cpus,
                    Duration::from_secs_f64(opts.calibrate_secs),
                    opts.verbose,
                )?;
                let spin = plan::spin_for_factor(factor, lat.local_ns, lat.remote_ns);
                let how = format!(
                    "factor {factor:.2} over {}: lab off local {:.0} us, remote {:.0} us ({} reads)",
                    disk.name,
                    lat.local_ns / 1e3,
                    lat.remote_ns / 1e3,
                    lat.reads
                );
                probe = Some(Probe {
                    disk: disk.name.clone(),
                    local_cpus,
                    remote_cpus,
                    ratio_off: lat.remote_ns / lat.local_ns,
                });
                (spin, how)
            }
            (None, None) => bail!("give --us N or --factor F"),
        };
        out.push(NodeSpin {
            node: disk.node,
            nearest,
            spin_ns,
            how,
            probe,
        });
    }
    Ok(out)
}

/// Loads the program with one of its two hooks, fills the tables and attaches.
fn load_and_attach<'o>(
    open_object: &'o mut MaybeUninit<OpenObject>,
    topo: &Topology,
    disks: &[LabDisk],
    table: &[(u32, u32, u64)],
    use_fexit: bool,
) -> Result<(LabSkel<'o>, Link)> {
    let mut open = LabSkelBuilder::default()
        .open(open_object)
        .context("opening the lab's BPF object")?;
    {
        let rodata = open
            .maps
            .rodata_data
            .as_mut()
            .context("the lab's BPF object has no rodata")?;
        for (cpu, node) in topo.cpu_to_node().iter().enumerate() {
            if let (Some(slot), Some(node)) = (rodata.lab_cpu_node.get_mut(cpu), node) {
                *slot = *node as u8;
            }
        }
    }
    open.progs.lab_after_start_request.set_autoload(use_fexit);
    open.progs.lab_at_rq_issue.set_autoload(!use_fexit);
    let skel = open.load().context("loading the lab's BPF program")?;
    for disk in disks {
        skel.maps
            .lab_disk_node
            .update(&disk.dev.to_ne_bytes(), &[disk.node as u8], MapFlags::ANY)
            .with_context(|| format!("registering {}", disk.name))?;
    }
    write_spins(&skel, table)?;
    let link = if use_fexit {
        skel.progs.lab_after_start_request.attach()
    } else {
        skel.progs.lab_at_rq_issue.attach()
    }
    .context("attaching the lab's BPF program")?;
    Ok((skel, link))
}

/// Nodes per side of the spin table: the map holds a square of them.
fn table_side(skel: &LabSkel) -> usize {
    (skel.maps.lab_spin_ns.max_entries() as f64).sqrt() as usize
}

fn write_spins(skel: &LabSkel, table: &[(u32, u32, u64)]) -> Result<()> {
    let side = table_side(skel);
    for &(disk_node, sub_node, ns) in table {
        let (d, s) = (disk_node as usize, sub_node as usize);
        if d >= side || s >= side {
            bail!("node {} is beyond the lab's {side} nodes", d.max(s));
        }
        let idx = (d * side + s) as u32;
        skel.maps
            .lab_spin_ns
            .update(&idx.to_ne_bytes(), &ns.to_ne_bytes(), MapFlags::ANY)
            .context("writing the spin table")?;
    }
    Ok(())
}

/// Passes of the --factor refinement: each measures the ratio with the spin in
/// place and moves the spin (about `--calibrate-secs` each).
const REFINE_PASSES: u32 = 3;

/// --factor, the passes after the first estimate: with the spin in place, measure
/// the ratio again and move the spin to where the line fitted through every point
/// so far (the lab off, no spin, first) reads the factor. On an emulator a spinning
/// vCPU also slows the vCPUs that serve the request, so the first estimate is off
/// by tens of per cent (one pass left fio at 1.34x or 2.84x on a loaded CI host),
/// and each pass's own ratio is noisy, hence several passes and one fit over them
/// all. Ratios, each measured interleaved, are what drift leaves alone.
fn refine(skel: &LabSkel, topo: &Topology, spins: &mut [NodeSpin], opts: &Opts) -> Result<()> {
    let Some(factor) = opts.factor else {
        return Ok(());
    };
    let total = Duration::from_secs_f64(opts.calibrate_secs);
    for i in 0..spins.len() {
        let Some(p) = spins[i].probe.clone() else {
            continue;
        };
        // No spin: the remote side already reads F or more; fit_spin never
        // moves a spin to 0, so this holds for every pass.
        if spins[i].spin_ns == 0 {
            continue;
        }
        let mut points = vec![(0u64, p.ratio_off)];
        for _ in 0..REFINE_PASSES {
            let spin = spins[i].spin_ns;
            let lat =
                calibrate::measure(&p.disk, &p.local_cpus, &p.remote_cpus, total, opts.verbose)?;
            let ratio_on = lat.remote_ns / lat.local_ns;
            points.push((spin, ratio_on));
            let next = plan::fit_spin(&points, factor, lat.local_ns);
            spins[i].spin_ns = next;
            spins[i].how += &format!(
                "; with {:.0} us spin: local {:.0} us, remote {:.0} us ({ratio_on:.2}x) -> {:.0} us",
                spin as f64 / 1e3,
                lat.local_ns / 1e3,
                lat.remote_ns / 1e3,
                next as f64 / 1e3
            );
            write_spins(skel, &plan::spin_table(topo, &base_of(spins)))?;
        }
    }
    Ok(())
}

fn base_of(spins: &[NodeSpin]) -> Vec<(u32, u64)> {
    spins.iter().map(|s| (s.node, s.spin_ns)).collect()
}

/// The fields of `struct lab_counts` in bpf/lab_penalty.bpf.c, in order:
/// local, remote, spun ns, capped spins, late spins.
const LAB_COUNTS: usize = 5;

/// `struct lab_counts` summed over CPUs.
fn counts(skel: &LabSkel) -> Result<[u64; LAB_COUNTS]> {
    let per_cpu = skel
        .maps
        .lab_counts
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .context("reading the lab's counters")?
        .unwrap_or_default();
    let mut sum = [0u64; LAB_COUNTS];
    for bytes in per_cpu {
        for (i, chunk) in bytes.chunks_exact(8).take(LAB_COUNTS).enumerate() {
            sum[i] += u64::from_ne_bytes(chunk.try_into().unwrap_or_default());
        }
    }
    Ok(sum)
}

fn run(opts: &Opts) -> Result<()> {
    check_args(opts)?;
    if unsafe { libc::geteuid() } != 0 {
        bail!("needs root (loads a BPF program)");
    }
    let topo = Topology::discover(Path::new("/sys"))?;
    let disks = plan::select_disks(&topo, &opts.device)?;
    let mut spins = spins(&topo, &disks, opts)?;
    let table = plan::spin_table(&topo, &base_of(&spins));

    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;

    let mut obj_fexit = MaybeUninit::uninit();
    let mut obj_tp = MaybeUninit::uninit();
    let attempt = if opts.tracepoint {
        Err(anyhow::anyhow!("--tracepoint given"))
    } else {
        load_and_attach(&mut obj_fexit, &topo, &disks, &table, true)
    };
    let (skel, link, hook) = match attempt {
        Ok((skel, link)) => (skel, link, "fexit/blk_mq_start_request"),
        Err(why) => {
            let (skel, link) = load_and_attach(&mut obj_tp, &topo, &disks, &table, false)
                .with_context(|| format!("the fexit hook failed too ({why:#})"))?;
            if !opts.tracepoint {
                eprintln!("remote-penalty: fexit/blk_mq_start_request unavailable ({why:#}); using block_rq_issue");
            }
            (skel, link, "tp_btf/block_rq_issue")
        }
    };

    refine(&skel, &topo, &mut spins, opts)?;
    // The counts of the calibration's own reads are not the workload's.
    let calibration_counts = counts(&skel)?;

    let per_node: Vec<String> = spins
        .iter()
        .map(|s| {
            let names: Vec<&str> = disks
                .iter()
                .filter(|d| d.node == s.node)
                .map(|d| d.name.as_str())
                .collect();
            format!(
                "{} on node {}: remote requests spin {:.1} us from node {} (distance {}), more from farther nodes [{}]",
                names.join(","),
                s.node,
                s.spin_ns as f64 / 1e3,
                s.nearest.0,
                s.nearest.1,
                s.how
            )
        })
        .collect();
    println!("remote-penalty: active ({hook}): {}", per_node.join("; "));

    while !shutdown.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let now = counts(&skel)?;
    let [local, remote, spun_ns, capped, late]: [u64; LAB_COUNTS] =
        std::array::from_fn(|i| now[i].saturating_sub(calibration_counts[i]));
    drop(link);
    drop(skel);
    let per_remote = |n: u64| {
        if remote > 0 {
            n as f64 / remote as f64
        } else {
            0.0
        }
    };
    eprintln!(
        "remote-penalty: removed; {remote} remote requests delayed (mean {:.1} us, {:.1} % more than 10 % late{}), {local} local",
        per_remote(spun_ns) / 1e3,
        per_remote(late) * 100.0,
        if capped > 0 { format!(", {capped} capped") } else { String::new() }
    );
    Ok(())
}

fn main() {
    let opts = Opts::parse();
    if let Err(err) = run(&opts) {
        eprintln!("remote-penalty: error: {err:#}");
        std::process::exit(if check_args(&opts).is_err() { 2 } else { 1 });
    }
}
