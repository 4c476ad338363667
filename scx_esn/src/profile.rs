// SPDX-License-Identifier: GPL-2.0-only
//! `scx_esn profile`: the research's one-off profile sweep, run for real with
//! fio, as a starting point for the live controller.
//!
//! ```text
//!  for n in 1..=K:  fio n jobs pinned to the device's node   ─► local lat(n), IOPS
//!                   fio n jobs pinned to the nearest other node ─► remote lat(n), IOPS
//!  P_numa    = remote lat(1) / local lat(1)    (one job: no contention on either side)
//!  P_cont(n) = local lat(n) / local lat(1)     (what n jobs sharing the node cost each)
//!  n*        = largest n with P_cont(m) <= P_numa for every m <= n
//! ```
//!
//! fio's latency is measured by the job itself, from submission to the moment it
//! sees the completion, so it includes the wait for a CPU that contention adds.
//! `--save` seeds the controller with these points (see
//! `esn_controller::NodeController::seed`) and stores it where the scheduler
//! reads its learned state, so the scheduler starts from the profile instead
//! of from the CPU count.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};
use esn_controller::persist::{self, LoadOutcome};
use esn_controller::{ControllerConfig, NodeController, NodeState};
use esn_topology::Topology;
use log::{info, warn};
use serde::Serialize;

use crate::cli::ProfileOpts;
use esn_controller::live as control;
use esn_topology::plan::Plan;

/// What one fio run measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FioResult {
    pub iops: f64,
    /// Mean total latency of a read (submission to completion seen by the job).
    pub lat_ns: f64,
}

/// One row of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileRow {
    pub jobs: u32,
    pub local: FioResult,
    pub remote: Option<FioResult>,
    /// local lat(n) / local lat(1)
    pub p_cont: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    pub device: String,
    pub node: u32,
    pub remote_node: Option<u32>,
    pub rows: Vec<ProfileRow>,
    /// remote lat(1) / local lat(1), when there is another node to measure from.
    pub p_numa_measured: Option<f64>,
    /// What n* was balanced against: the override, the measurement or the prior.
    pub p_numa: f64,
    pub p_numa_source: &'static str,
    pub balance: u32,
}

/// The read side of fio's JSON output (`--output-format=json`, group reporting).
pub fn parse_fio_json(text: &str) -> Result<FioResult> {
    // fio may print warnings before the JSON object.
    let start = text.find('{').context("no JSON object in fio's output")?;
    let v: serde_json::Value =
        serde_json::from_str(&text[start..]).context("fio's JSON output does not parse")?;
    let read = v
        .get("jobs")
        .and_then(|j| j.get(0))
        .and_then(|j| j.get("read"))
        .context("fio's JSON has no jobs[0].read")?;
    let iops = read.get("iops").and_then(|x| x.as_f64());
    let lat = read
        .get("lat_ns")
        .and_then(|l| l.get("mean"))
        .and_then(|x| x.as_f64());
    match (iops, lat) {
        (Some(iops), Some(lat_ns)) if iops > 0.0 && lat_ns > 0.0 => Ok(FioResult { iops, lat_ns }),
        _ => bail!("fio completed no reads (iops {iops:?}, mean latency {lat:?} ns)"),
    }
}

/// n* from the sweep: the largest n such that every m <= n kept P_cont(m) at
/// or below `p_numa`; 1 at least, since the device's node always keeps one.
pub fn balance_point(rows: &[ProfileRow], p_numa: f64) -> u32 {
    let mut best = 1;
    for row in rows {
        if row.p_cont > p_numa {
            break;
        }
        best = best.max(row.jobs);
    }
    best
}

/// The rows and penalties from the measured (local, remote) pairs, in jobs
/// order starting at 1.
pub fn analyse(
    measured: Vec<(u32, FioResult, Option<FioResult>)>,
    p_numa_override: Option<f64>,
    prior: f64,
) -> (Vec<ProfileRow>, Option<f64>, f64, &'static str, u32) {
    let base = measured.first().map(|m| m.1.lat_ns).unwrap_or(1.0);
    let p_numa_measured = measured
        .first()
        .and_then(|(_, local, remote)| remote.map(|r| r.lat_ns / local.lat_ns));
    let rows: Vec<ProfileRow> = measured
        .into_iter()
        .map(|(jobs, local, remote)| ProfileRow {
            jobs,
            local,
            remote,
            p_cont: local.lat_ns / base,
        })
        .collect();
    let (p_numa, source) = match (p_numa_override, p_numa_measured) {
        (Some(p), _) => (p, "override"),
        (None, Some(p)) => (
            p.clamp(
                esn_controller::NUMA_PENALTY_MIN,
                esn_controller::NUMA_PENALTY_MAX,
            ),
            "measured",
        ),
        (None, None) => (prior, "prior"),
    };
    let balance = balance_point(&rows, p_numa);
    (rows, p_numa_measured, p_numa, source, balance)
}

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

pub fn render(p: &Profile) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "device {} on node {}; remote node {}",
        p.device,
        p.node,
        p.remote_node
            .map_or_else(|| "none".to_string(), |n| n.to_string())
    );
    let _ = writeln!(
        out,
        "{:>4} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "jobs", "local_iops", "local_us", "remote_iops", "remote_us", "P_cont", "rem/loc"
    );
    for r in &p.rows {
        let (riops, rlat, ratio) = match r.remote {
            Some(x) => (
                format!("{:.0}", x.iops),
                format!("{:.1}", x.lat_ns / 1000.0),
                format!("{:.2}", x.lat_ns / r.local.lat_ns),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{:>4} {:>10.0} {:>10.1} {:>10} {:>10} {:>8.2} {:>8}",
            r.jobs,
            r.local.iops,
            r.local.lat_ns / 1000.0,
            riops,
            rlat,
            r.p_cont,
            ratio
        );
    }
    let _ = writeln!(
        out,
        "P_numa {:.2} ({}{}); balance point n* = {}: keep up to {} I/O-bound task(s) on node {}",
        p.p_numa,
        p.p_numa_source,
        match (p.p_numa_source, p.p_numa_measured) {
            ("override", Some(m)) => format!(", measured {m:.2}"),
            ("measured", Some(m)) if (m - p.p_numa).abs() > 1e-9 => {
                format!(", {m:.2} clamped")
            }
            _ => String::new(),
        },
        p.balance,
        p.balance,
        p.node
    );
    out
}

/// Seeds the controller of the profiled node and writes it into the state
/// file, keeping what the file holds for other nodes of this topology.
fn save(plan: &Plan, p: &Profile, path: &Path) -> Result<()> {
    // A running scheduler owns the file and would overwrite this profile at
    // its next save: refuse rather than lose it (the error says what to do).
    let _lock = control::own_state_file(path)?;
    let fingerprint = control::topology_fingerprint(plan);
    let mut nodes: BTreeMap<u32, NodeState> = match persist::load(path, &fingerprint) {
        LoadOutcome::Loaded(state) => state.nodes.into_iter().map(|n| (n.node, n)).collect(),
        LoadOutcome::Missing => BTreeMap::new(),
        LoadOutcome::Ignored(why) => {
            warn!("replacing {}: {why}", path.display());
            BTreeMap::new()
        }
    };
    let cpus = plan.node_cpus.get(p.node as usize).copied().unwrap_or(1);
    let mut ctl = NodeController::new(p.node, p.balance, cpus, &ControllerConfig::default());
    let points: Vec<(u32, f64)> = p.rows.iter().map(|r| (r.jobs, r.p_cont)).collect();
    ctl.seed(&points, p.p_numa_measured, p.balance);
    nodes.insert(p.node, ctl.export());
    control::save_state(
        path,
        &persist::LearnedState::new(fingerprint, nodes.into_values().collect()),
    )
    .with_context(|| format!("saving the profile to {}", path.display()))?;
    info!(
        "saved node {}'s profile to {}: the scheduler starts from threshold {} on this topology",
        p.node,
        path.display(),
        ctl.threshold()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fio(iops: f64, lat_us: f64) -> FioResult {
        FioResult {
            iops,
            lat_ns: lat_us * 1000.0,
        }
    }

    #[test]
    fn parses_fio_json_after_warnings() {
        let text = r#"fio: some warning
{"fio version": "fio-3.33", "jobs": [{"jobname": "esn-profile",
  "read": {"iops": 2500.5, "lat_ns": {"min": 1, "max": 9, "mean": 400123.5}},
  "write": {"iops": 0}}]}"#;
        let r = parse_fio_json(text).unwrap();
        assert_eq!(r.iops, 2500.5);
        assert_eq!(r.lat_ns, 400123.5);
    }

    #[test]
    fn fio_output_without_reads_is_an_error() {
        for bad in [
            "",
            "not json",
            r#"{"jobs": []}"#,
            r#"{"jobs": [{"read": {"iops": 0, "lat_ns": {"mean": 0}}}]}"#,
        ] {
            assert!(parse_fio_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn penalties_and_balance_point_of_a_sweep() {
        let measured = vec![
            (1, fio(10_000.0, 100.0), Some(fio(6_000.0, 200.0))),
            (2, fio(19_000.0, 110.0), Some(fio(11_000.0, 230.0))),
            (3, fio(24_000.0, 180.0), Some(fio(14_000.0, 260.0))),
            (4, fio(25_000.0, 260.0), Some(fio(15_000.0, 300.0))),
        ];
        let (rows, measured_p, p, source, n) = analyse(measured.clone(), None, 1.3);
        assert_eq!(measured_p, Some(2.0));
        assert_eq!((p, source), (2.0, "measured"));
        assert_eq!(rows[2].p_cont, 1.8);
        assert_eq!(n, 3);
        let (_, _, p, source, n) = analyse(measured.clone(), Some(1.05), 1.3);
        assert_eq!((p, source, n), (1.05, "override", 1));
        // One node: no remote runs, the prior decides.
        let local_only = measured.iter().map(|m| (m.0, m.1, None)).collect();
        let (rows, measured_p, p, source, n) = analyse(local_only, None, 1.3);
        assert_eq!((measured_p, p, source, n), (None, 1.3, "prior", 2));
        let text = render(&Profile {
            device: "nvme0n1".into(),
            node: 0,
            remote_node: None,
            rows,
            p_numa_measured: None,
            p_numa: 1.3,
            p_numa_source: "prior",
            balance: 2,
        });
        assert!(
            text.contains("   2      19000      110.0          -"),
            "{text}"
        );
        assert!(text.ends_with("balance point n* = 2: keep up to 2 I/O-bound task(s) on node 0\n"));
    }

    #[test]
    fn balance_stops_at_the_first_costly_n() {
        let row = |jobs, p_cont| ProfileRow {
            jobs,
            local: fio(1.0, 1.0),
            remote: None,
            p_cont,
        };
        // noise: n=3 cheap again after a costly n=2 does not count
        let rows = [row(1, 1.0), row(2, 1.5), row(3, 1.1)];
        assert_eq!(balance_point(&rows, 1.3), 1);
        assert_eq!(balance_point(&rows, 0.5), 1);
        assert_eq!(balance_point(&[], 2.0), 1);
    }
}
