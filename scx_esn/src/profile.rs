// SPDX-License-Identifier: GPL-2.0-only
//! `scx_esn profile`: the research's one-off profile sweep, run for real with
//! fio (`esn_controller::profile` turns the figures into the balance point
//! and, with `--save`, the seeded learned state).
//!
//! ```text
//!  for n in 1..=K:  fio n jobs pinned to the device's node     ─► local lat(n), IOPS
//!                   fio n jobs pinned to the nearest other node ─► remote lat(n), IOPS
//! ```

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};
use esn_controller::profile::{analyse, parse_fio_json, render, save, FioResult, Profile};
use esn_controller::ControllerConfig;
use esn_topology::plan::Plan;
use esn_topology::Topology;
use log::info;

use crate::cli::ProfileOpts;

fn cpu_list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// One fio run: `jobs` jobs of 4 KiB direct random reads on `target`, pinned
/// to `cpus`.
fn run_fio(opts: &ProfileOpts, target: &str, jobs: u32, cpus: &[u32]) -> Result<FioResult> {
    let mut cmd = Command::new(&opts.fio);
    cmd.args([
        "--name=esn-profile",
        // fio splits --filename at ':' (a list of files) unless escaped.
        &format!("--filename={}", target.replace(':', "\\:")),
        "--rw=randread",
        "--bs=4k",
        "--direct=1",
        "--ioengine=psync",
        &format!("--numjobs={jobs}"),
        "--time_based",
        &format!("--runtime={}", opts.runtime),
        "--ramp_time=1",
        "--group_reporting",
        &format!("--cpus_allowed={}", cpu_list(cpus)),
        "--output-format=json",
    ]);
    if opts.file.is_some() {
        cmd.arg(format!("--size={}M", opts.file_size_mb));
    } else {
        cmd.arg("--readonly");
    }
    let out = cmd.output().with_context(|| {
        format!(
            "running {}: is fio installed? (Debian: apt-get install fio)",
            opts.fio.display()
        )
    })?;
    if !out.status.success() {
        bail!(
            "fio ({jobs} jobs on CPUs {}) failed ({}): {}",
            cpu_list(cpus),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_fio_json(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("fio ({jobs} jobs on CPUs {})", cpu_list(cpus)))
}

/// The device's local node (`Plan`'s rule): where the scheduler runs its
/// I/O-bound users.
fn device_node(topo: &Topology, plan: &Plan, name: &str) -> Result<u32> {
    let Some(dev) = topo.devices.iter().find(|d| d.name == name) else {
        let known: Vec<&str> = topo.devices.iter().map(|d| d.name.as_str()).collect();
        bail!(
            "no disk named {name:?}; the disks are: {}",
            known.join(", ")
        );
    };
    plan.local_node(name).with_context(|| {
        format!(
            "{name} has no known NUMA node ({}): there is no local node to profile",
            dev.node_source
        )
    })
}

pub fn run(topo: &Topology, opts: &ProfileOpts, shutdown: &AtomicBool) -> Result<()> {
    let plan = Plan::new(topo, None)?;
    let node = device_node(topo, &plan, &opts.device)?;
    let local_cpus = &topo.node(node).context("the device's node is gone")?.cpus;
    let remote_node = plan
        .spill_order
        .get(node as usize)
        .and_then(|o| o.first())
        .map(|&n| u32::from(n));
    let remote_cpus = remote_node
        .and_then(|n| topo.node(n))
        .map(|n| n.cpus.clone());
    let max_jobs = opts.max_jobs.unwrap_or(local_cpus.len() as u32).max(1);
    let target = match &opts.file {
        Some(path) => path.display().to_string(),
        None => format!("/dev/{}", opts.device),
    };
    if opts.file.is_none() && !Path::new(&target).exists() {
        bail!("{target} does not exist");
    }
    info!(
        "profiling {target} (node {node}) with 1..{max_jobs} fio jobs, {} s each, local on \
         CPUs {}{}",
        opts.runtime,
        cpu_list(local_cpus),
        match (&remote_node, &remote_cpus) {
            (Some(r), Some(c)) => format!(", remote on node {r} (CPUs {})", cpu_list(c)),
            _ => "; no other node with CPUs: the NUMA penalty cannot be measured".into(),
        }
    );

    let mut measured = Vec::new();
    for jobs in 1..=max_jobs {
        let local = run_fio(opts, &target, jobs, local_cpus)?;
        if shutdown.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let remote = match &remote_cpus {
            Some(cpus) => Some(run_fio(opts, &target, jobs, cpus)?),
            None => None,
        };
        if shutdown.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        info!(
            "{jobs} job(s): local {:.0} IOPS {:.1} us{}",
            local.iops,
            local.lat_ns / 1000.0,
            remote.map_or(String::new(), |r| format!(
                ", remote {:.0} IOPS {:.1} us",
                r.iops,
                r.lat_ns / 1000.0
            ))
        );
        measured.push((jobs, local, remote));
    }
    let prior = ControllerConfig::default().numa_prior;
    let (rows, p_numa_measured, p_numa, p_numa_source, balance) =
        analyse(measured, opts.numa_penalty, prior);
    let profile = Profile {
        device: opts.device.clone(),
        node,
        remote_node,
        rows,
        p_numa_measured,
        p_numa,
        p_numa_source,
        balance,
    };
    // A closed stdout does not stop --save: the profile is measured.
    let printed = if opts.json {
        crate::output::write(&format!("{}\n", serde_json::to_string(&profile)?))
    } else {
        crate::output::write(&render(&profile))
    };
    if let Err(err) = printed {
        if !crate::output::is_closed(&err) {
            return Err(err);
        }
    }
    if opts.save {
        // device_node() found the disk's local node in the plan, so the
        // scheduler places its users and will read this.
        save(&plan, &profile, &opts.state_file)?;
    }
    Ok(())
}
