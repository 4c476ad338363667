// SPDX-License-Identifier: GPL-2.0-only
//! The research's one-off profile sweep, from fio's figures to the balance
//! point, and the controller it seeds (`scx_esn profile` runs fio and hands
//! the figures here).
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
//! [`save`] seeds the controller with these points (see [`NodeController::seed`])
//! and stores it where the scheduler reads its learned state, so the scheduler
//! starts from the profile instead of from the CPU count.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};
use esn_topology::plan::Plan;
use log::{info, warn};
use serde::Serialize;

use crate::live;
use crate::persist::{self, LoadOutcome, NodeState};
use crate::{ControllerConfig, NodeController};

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
            p.clamp(crate::NUMA_PENALTY_MIN, crate::NUMA_PENALTY_MAX),
            "measured",
        ),
        (None, None) => (prior, "prior"),
    };
    let balance = balance_point(&rows, p_numa);
    (rows, p_numa_measured, p_numa, source, balance)
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
pub fn save(plan: &Plan, p: &Profile, path: &Path) -> Result<()> {
    // A running scheduler owns the file and would overwrite this profile at
    // its next save: refuse rather than lose it (the error says what to do).
    let _lock = live::own_state_file(path)?;
    let fingerprint = live::topology_fingerprint(plan);
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
    live::save_state(
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
