// SPDX-License-Identifier: GPL-2.0-only
//! The live controller: what the scheduler measures goes into `esn_controller`,
//! and the thresholds it learns go back into BPF.
//!
//! ```text
//!  every 100 ms     nr_placed[node] (BPF .bss) ─────────────────────┐ mean
//!                     and of the node it spills to (its free slots) ─┤
//!  every interval   io_hists Δ: device latency of the node's disks, │
//!                     local vs remote submissions ──────────────────┤
//!                   node_sched Δ: runnable→running wait of the      │
//!                     node's placed I/O tasks, and of those placed  │
//!                     on the node it spills to first ───────────────┤
//!                                                                   ▼
//!                            NodeSample ─► NodeController::step ─► Decision
//!                                                                   │
//!                            node_threshold[node] (BPF map) ◄───────┘
//!  every minute and at exit   learned state ─► --state-file
//! ```
//!
//! One controller per node that is the local node of block devices
//! (`esn_topology::plan::Plan::local_node`); other nodes keep their
//! CPU count as threshold, which only limits the tasks spilled onto them.
//! A node starts from the state saved for this topology, else from its CPU
//! count (the static default), and moves from there one step at a time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use esn_stats::snapshot::{IoCounters, IoKey, Locality, Op};
use esn_topology::devt::DevT;
use log::{info, warn};

use esn_topology::plan::Plan;

use crate::persist::{self, LoadOutcome};
use crate::{ControllerConfig, Decision, LatencyStat, NodeController, NodeSample, NodeWaits};

/// Where the learned state lives unless `--state-file` says otherwise.
pub const DEFAULT_STATE_FILE: &str = "/var/lib/scx_esn/learned.json";

/// How long to wait for another process's hold on the state file: long enough
/// for a `profile --save` to finish writing, short enough to fail visibly.
const STATE_LOCK_WAIT: Duration = Duration::from_secs(2);

/// One node under control, with the disks whose latency it is judged by.
struct ControlledNode {
    node: u32,
    disks: Vec<DevT>,
    /// The node its tasks spill to first (nearest with CPUs), if any.
    spill_to: Option<u32>,
    /// That node's slot limit when no controller of ours sets it (its CPU
    /// count, or --threshold).
    spill_limit: u32,
    ctl: NodeController,
}

pub struct Control {
    nodes: Vec<ControlledNode>,
    fingerprint: String,
    state_file: Option<PathBuf>,
    ticks: u32,
    /// Sum of each node's nr_placed readings over the interval (indexed by
    /// node), for the means: a controlled node's own, and its spill node's.
    placed_sums: Vec<u64>,
    last_io: BTreeMap<IoKey, IoCounters>,
    last_waits: Vec<NodeWaits>,
    /// When the interval being measured began.
    interval_start: Instant,
    /// The last decision of each controlled node, for the stats.
    decisions: Vec<Decision>,
    /// A failed save warns once, not every minute.
    save_failed: bool,
    /// This process's hold on the state file, for the whole run.
    _state_lock: Option<persist::StateLock>,
}

/// A short text that changes whenever what was learned stops applying: the
/// nodes with their CPU counts and distances, and the disks with their node.
pub fn topology_fingerprint(plan: &Plan) -> String {
    let mut out = String::from("nodes");
    for (node, &cpus) in plan.node_cpus.iter().enumerate() {
        if cpus == 0 {
            continue;
        }
        let _ = write!(out, " {node}:{cpus}cpu");
        for other in plan.spill_order.get(node).into_iter().flatten() {
            let _ = write!(out, ">{other}");
        }
    }
    out.push_str("; disks");
    for dev in &plan.devices {
        let _ = write!(out, " {}@{}", dev.name, dev.run_node);
    }
    out
}

/// Mean device latency (issue to completion) of reads and writes to `disks`
/// submitted with `locality`, over what happened between the two readings.
/// Flushes and discards are left out: their latency says nothing about the
/// path a data transfer takes.
fn device_latency(
    before: &BTreeMap<IoKey, IoCounters>,
    now: &BTreeMap<IoKey, IoCounters>,
    disks: &[DevT],
    locality: Locality,
) -> LatencyStat {
    let (mut count, mut sum_ns) = (0u64, 0u64);
    for (key, counters) in now {
        if key.locality != locality
            || !matches!(key.op, Op::Read | Op::Write)
            || !disks.contains(&key.dev)
        {
            continue;
        }
        let delta = match before.get(key) {
            Some(earlier) => counters.device.delta(&earlier.device),
            None => counters.device.clone(),
        };
        count = count.saturating_add(delta.count);
        sum_ns = sum_ns.saturating_add(delta.sum_ns);
    }
    let mean = if count > 0 {
        sum_ns as f64 / count as f64
    } else {
        0.0
    };
    LatencyStat::new(count, mean)
}

/// What one interval measured on a node: `waits` are the interval's
/// runnable-to-running waits on it, `placed` the mean of its nr_placed
/// readings (rounded).
pub fn node_sample(
    before: &BTreeMap<IoKey, IoCounters>,
    now: &BTreeMap<IoKey, IoCounters>,
    disks: &[DevT],
    waits: &NodeWaits,
    placed: u32,
    elapsed: Duration,
) -> NodeSample {
    NodeSample {
        placed,
        elapsed_s: elapsed.as_secs_f64(),
        local_lat: device_latency(before, now, disks, Locality::Local),
        remote_lat: device_latency(before, now, disks, Locality::Remote),
        run_delay: contended_delay(waits),
        spill_delay: LatencyStat::default(),
        spill_room: None,
    }
}

/// The placed tasks' waits beyond an uncontended wake-up's, as a sample.
fn contended_delay(waits: &NodeWaits) -> LatencyStat {
    LatencyStat::new(waits.io_waits, waits.io_contended_mean_ns().unwrap_or(0.0))
}

/// Node `node`'s waits between two cumulative readings (none if either lacks it).
fn interval_waits(now: &[NodeWaits], before: &[NodeWaits], node: u32) -> NodeWaits {
    match (now.get(node as usize), before.get(node as usize)) {
        (Some(now), Some(before)) => now.delta(before),
        _ => NodeWaits::default(),
    }
}

/// Rounded mean of `ticks` readings summing to `sum`; 0 without readings.
fn mean_placed(sum: u64, ticks: u32) -> u32 {
    if ticks == 0 {
        return 0;
    }
    ((sum + u64::from(ticks) / 2) / u64::from(ticks)) as u32
}

/// Makes the directory of a state file (root-owned 0755 when run as root):
/// /var/lib/scx_esn does not exist before the first save.
fn make_state_dir(path: &Path) -> std::io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir),
        None => Ok(()),
    }
}

/// What was learned, kept in memory across the scheduler's in-process
/// restarts (the kernel unloads it on CPU hotplug): one state per topology,
/// so that a CPU going offline and coming back finds the state learned before
/// it left, not the one clamped to fewer CPUs meanwhile. The state file only
/// holds the current topology's.
#[derive(Debug, Default)]
pub struct CarriedState {
    by_topology: BTreeMap<String, persist::LearnedState>,
    last: Option<String>,
}

impl CarriedState {
    pub fn keep(&mut self, state: persist::LearnedState) {
        self.last = Some(state.topology.clone());
        self.by_topology.insert(state.topology.clone(), state);
    }

    /// The state learned on this topology, else the latest one (on a new
    /// topology the controllers clamp it to the CPUs there are).
    pub fn for_topology(&self, fingerprint: &str) -> Option<&persist::LearnedState> {
        self.by_topology.get(fingerprint).or_else(|| {
            self.last
                .as_ref()
                .and_then(|last| self.by_topology.get(last))
        })
    }
}

/// Takes the state file at `path` for this process (see `persist::lock`),
/// waiting up to STATE_LOCK_WAIT for another holder. Held elsewhere: an error
/// that says what to do. Not lockable at all (no writable directory): a
/// warning and `None`, as saving there will only warn too.
pub fn own_state_file(path: &Path) -> Result<Option<persist::StateLock>> {
    if let Err(err) = make_state_dir(path) {
        warn!("cannot create the directory of {}: {err}", path.display());
        return Ok(None);
    }
    let deadline = Instant::now() + STATE_LOCK_WAIT;
    loop {
        match persist::lock(path) {
            Ok(lock) => return Ok(Some(lock)),
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    anyhow::bail!(
                        "{err} (a running scheduler, or profile --save): stop it first, or \
                         use another --state-file"
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(err) => {
                warn!(
                    "cannot lock {}: {err}; going on without the lock",
                    path.display()
                );
                return Ok(None);
            }
        }
    }
}

/// The learned state of `state_file` for `fingerprint`, or nothing (said in
/// the log): never an error, a bad file only costs what it had learned.
fn load_state(state_file: Option<&Path>, fingerprint: &str) -> Option<persist::LearnedState> {
    let path = state_file?;
    match persist::load(path, fingerprint) {
        LoadOutcome::Loaded(state) => Some(state),
        LoadOutcome::Missing => {
            info!(
                "no learned state at {}: learning from scratch",
                path.display()
            );
            None
        }
        LoadOutcome::Ignored(why) => {
            warn!(
                "ignoring the learned state in {}: {why}; learning from scratch \
                 (the file is replaced at the next save)",
                path.display()
            );
            None
        }
    }
}

impl Control {
    /// Controllers for the nodes hosting `plan`'s devices, restored from
    /// `state_file` when it was learned on this topology. `io` and `waits`
    /// are the current cumulative readings the first interval starts from.
    /// The state file is this process's until the controller is dropped; an
    /// error when another process holds it.
    pub fn new(
        plan: &Plan,
        cfg: &ControllerConfig,
        state_file: Option<PathBuf>,
        fingerprint: String,
        io: BTreeMap<IoKey, IoCounters>,
        waits: Vec<NodeWaits>,
        carried: Option<&persist::LearnedState>,
    ) -> Result<Control> {
        let state_lock = match state_file.as_deref() {
            Some(path) => own_state_file(path)?,
            None => None,
        };
        let learned = match carried {
            Some(state) => {
                info!(
                    "carrying what was learned over the restart ({})",
                    state.topology
                );
                Some(state.clone())
            }
            None => load_state(state_file.as_deref(), &fingerprint),
        };
        let mut by_node: BTreeMap<u32, Vec<DevT>> = BTreeMap::new();
        for dev in &plan.devices {
            by_node.entry(dev.run_node).or_default().push(dev.dev);
        }
        let nodes = by_node
            .into_iter()
            .map(|(node, disks)| {
                let cpus = plan.node_cpus.get(node as usize).copied().unwrap_or(1);
                let ctl = match learned.as_ref().and_then(|s| s.node(node)) {
                    Some(state) => {
                        let ctl = NodeController::restore(state, cfg, cpus);
                        info!(
                            "node {node}: threshold {} from the learned state",
                            ctl.threshold()
                        );
                        ctl
                    }
                    None => NodeController::new(node, cpus, cpus, cfg),
                };
                let spill_to = plan
                    .spill_order
                    .get(node as usize)
                    .and_then(|order| order.first())
                    .map(|&n| u32::from(n));
                let spill_limit = spill_to
                    .and_then(|n| plan.thresholds.get(n as usize))
                    .copied()
                    .unwrap_or(0);
                ControlledNode {
                    node,
                    disks,
                    spill_to,
                    spill_limit,
                    ctl,
                }
            })
            .collect();
        Ok(Control {
            nodes,
            fingerprint,
            state_file,
            ticks: 0,
            placed_sums: Vec::new(),
            last_io: io,
            last_waits: waits,
            interval_start: Instant::now(),
            decisions: Vec::new(),
            save_failed: false,
            _state_lock: state_lock,
        })
    }

    /// The threshold each controlled node starts with, to write before attach.
    pub fn initial_thresholds(&self) -> Vec<(u32, u32)> {
        self.nodes
            .iter()
            .map(|n| (n.node, n.ctl.threshold()))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// One reading of BPF's nr_placed, indexed by node.
    pub fn tick(&mut self, nr_placed: &[u32]) {
        if self.placed_sums.len() < nr_placed.len() {
            self.placed_sums.resize(nr_placed.len(), 0);
        }
        for (sum, &placed) in self.placed_sums.iter_mut().zip(nr_placed) {
            *sum += u64::from(placed);
        }
        self.ticks += 1;
    }

    /// End of an interval: one step of every node's controller on what the
    /// interval measured. Returns the decisions; their thresholds are what
    /// BPF is to use from now on.
    pub fn step(&mut self, io: BTreeMap<IoKey, IoCounters>, waits: Vec<NodeWaits>) -> &[Decision] {
        let mut decisions = Vec::with_capacity(self.nodes.len());
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.interval_start);
        self.interval_start = now;
        // A spill node that is itself a device node takes as many as its own
        // controller allows.
        let limits: BTreeMap<u32, u32> = self
            .nodes
            .iter()
            .map(|n| (n.node, n.ctl.threshold()))
            .collect();
        let placed_sum = |node: u32| self.placed_sums.get(node as usize).copied().unwrap_or(0);
        for n in &mut self.nodes {
            let wait = interval_waits(&waits, &self.last_waits, n.node);
            let placed = mean_placed(placed_sum(n.node), self.ticks);
            let mut sample = node_sample(&self.last_io, &io, &n.disks, &wait, placed, elapsed);
            if let Some(spill_to) = n.spill_to {
                sample.spill_delay =
                    contended_delay(&interval_waits(&waits, &self.last_waits, spill_to));
                if self.ticks > 0 {
                    let limit = limits.get(&spill_to).copied().unwrap_or(n.spill_limit);
                    let there = mean_placed(placed_sum(spill_to), self.ticks);
                    sample.spill_room = Some(limit.saturating_sub(there));
                }
            }
            let learned_before = n.ctl.threshold();
            let decision = n.ctl.step(&sample);
            if n.ctl.threshold() != learned_before {
                info!(
                    "node {}: threshold {learned_before} -> {} ({})",
                    n.node,
                    n.ctl.threshold(),
                    decision.inputs_text()
                );
            }
            decisions.push(decision);
        }
        self.placed_sums.fill(0);
        self.ticks = 0;
        self.last_io = io;
        self.last_waits = waits;
        self.decisions = decisions;
        &self.decisions
    }

    /// The last decisions, one per controlled node.
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }

    /// What every controlled node has learned, as the state file holds it.
    pub fn export(&self) -> persist::LearnedState {
        persist::LearnedState::new(
            self.fingerprint.clone(),
            self.nodes.iter().map(|n| n.ctl.export()).collect(),
        )
    }

    /// Writes the learned state, if there is a state file. A failure warns
    /// (once) and the scheduler goes on: losing what was learned is not a
    /// reason to stop scheduling.
    pub fn save(&mut self) {
        let Some(path) = self.state_file.clone() else {
            return;
        };
        match save_state(&path, &self.export()) {
            Ok(()) => {
                self.save_failed = false;
                log::debug!("learned state saved to {}", path.display());
            }
            Err(err) if !self.save_failed => {
                self.save_failed = true;
                warn!(
                    "cannot save the learned state to {}: {err}; pass --state-file \
                     with a writable path, or --no-state",
                    path.display()
                );
            }
            Err(_) => {}
        }
    }
}

/// Writes `state` to `path` (atomically, see `persist::save`), creating the
/// directory first.
pub fn save_state(path: &Path, state: &persist::LearnedState) -> std::io::Result<()> {
    make_state_dir(path)?;
    persist::save(path, state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use esn_stats::hist::LatHist;

    fn counters(samples: &[u64]) -> IoCounters {
        let mut device = LatHist::default();
        for &ns in samples {
            device.record(ns);
        }
        IoCounters {
            reqs: samples.len() as u64,
            device,
            ..Default::default()
        }
    }

    fn key(dev: u32, locality: Locality, op: Op) -> IoKey {
        IoKey {
            dev: DevT(dev),
            locality,
            op,
        }
    }

    #[test]
    fn sample_takes_the_interval_and_the_node_disks_only() {
        let disk = 259 << 20;
        let other_disk = 8 << 20;
        let mut before = BTreeMap::new();
        before.insert(key(disk, Locality::Local, Op::Read), counters(&[1_000_000]));
        let mut now = BTreeMap::new();
        // one old sample of 1 ms, two new of 10 us and 30 us
        now.insert(
            key(disk, Locality::Local, Op::Read),
            counters(&[1_000_000, 10_000, 30_000]),
        );
        now.insert(key(disk, Locality::Remote, Op::Write), counters(&[60_000]));
        now.insert(
            key(disk, Locality::Remote, Op::Flush),
            counters(&[9_000_000]),
        );
        now.insert(key(other_disk, Locality::Remote, Op::Read), counters(&[7]));
        let waits = NodeWaits {
            io_waits: 4,
            io_wait_ns: 8_000,
            fair_waits: 100,
            fair_wait_ns: 1,
            ..Default::default()
        };
        let sample = |waits: &NodeWaits| {
            node_sample(
                &before,
                &now,
                &[DevT(disk)],
                waits,
                2,
                Duration::from_secs(1),
            )
        };
        let s = sample(&waits);
        assert_eq!(s.placed, 2);
        assert_eq!(s.local_lat, LatencyStat::new(2, 20_000.0));
        assert_eq!(s.remote_lat, LatencyStat::new(1, 60_000.0));
        assert_eq!(s.run_delay, LatencyStat::new(4, 2_000.0));
        assert_eq!(s.numa_ratio(1), Some(3.0));
        assert_eq!(s.contention(1), Some(1.1));
        assert_eq!(s.completion_rate(1), Some(3.0));
        assert_eq!(s.completion_rate(4), None);

        // Three of the four waits found an idle CPU and took 1 µs each: the
        // fourth took 5 µs, and only the mean's excess over 1 µs is contention.
        let waits = NodeWaits {
            io_idle_waits: 3,
            io_idle_wait_ns: 3_000,
            ..waits
        };
        let s = sample(&waits);
        assert_eq!(s.run_delay, LatencyStat::new(4, 1_000.0));
        assert_eq!(s.contention(1), Some(1.05));
    }

    #[test]
    fn an_idle_interval_is_no_data() {
        let now = BTreeMap::new();
        let s = node_sample(
            &now,
            &now,
            &[DevT(1)],
            &NodeWaits::default(),
            0,
            Duration::ZERO,
        );
        assert_eq!(s.local_lat.count, 0);
        assert_eq!(s.numa_ratio(1), None);
        assert_eq!(s.contention(1), None);
    }

    #[test]
    fn a_reset_histogram_counts_from_zero_not_wrapped() {
        let disk = 1 << 20;
        let mut before = BTreeMap::new();
        before.insert(key(disk, Locality::Local, Op::Read), counters(&[5, 5, 5]));
        let mut now = BTreeMap::new();
        now.insert(key(disk, Locality::Local, Op::Read), counters(&[40]));
        let s = node_sample(
            &before,
            &now,
            &[DevT(disk)],
            &NodeWaits::default(),
            1,
            Duration::from_secs(1),
        );
        assert_eq!(s.local_lat, LatencyStat::new(1, 40.0));
    }

    #[test]
    fn placed_mean_rounds_and_survives_no_ticks() {
        assert_eq!(mean_placed(0, 0), 0);
        assert_eq!(mean_placed(15, 10), 2);
        assert_eq!(mean_placed(14, 10), 1);
    }

    fn plan() -> Plan {
        use esn_topology::{BlockDevice, DeviceKind, Node, Topology};
        let topo = Topology {
            nodes: vec![
                Node {
                    id: 0,
                    cpus: vec![0, 1],
                    distances: vec![(0, 10), (1, 20)],
                },
                Node {
                    id: 1,
                    cpus: vec![2, 3],
                    distances: vec![(0, 20), (1, 10)],
                },
            ],
            online_cpus: vec![0, 1, 2, 3],
            nr_cpu_ids: 4,
            devices: vec![BlockDevice {
                name: "nvme0n1".into(),
                major: 259,
                minor: 0,
                kind: DeviceKind::Nvme,
                home_node: Some(1),
                node_source: "test".into(),
                controllers: vec![],
                partitions: vec![],
                paths: vec![],
            }],
        };
        Plan::new(&topo, None).unwrap()
    }

    #[test]
    fn fingerprint_names_cpus_distances_and_disks() {
        let p = plan();
        let fp = topology_fingerprint(&p);
        assert_eq!(fp, "nodes 0:2cpu>1 1:2cpu>0; disks nvme0n1@1");
        let mut fewer = p.clone();
        fewer.node_cpus[1] = 1;
        assert_ne!(topology_fingerprint(&fewer), fp);
    }

    #[test]
    fn a_busy_spill_node_keeps_the_tasks_home() {
        // As below, two tasks placed on node 1 each wait a local request's
        // latency (P_cont(2) = 2, P_numa 1.0), but the tasks spilled to node 0
        // wait 1.5 times it there: a spill would cost 2.5, so nothing is shed.
        // With node 0's waits idle-free, the same interval sheds one, unless
        // node 0's 2 slots are both held: the task shed would find none.
        // Alpha 1 takes each interval's spill as it is, so one interval is
        // its whole warm-up (SpillContention).
        let p = plan();
        let cfg = ControllerConfig {
            confirm_intervals: 1,
            min_samples: 1,
            numa_alpha: 1.0,
            ..ControllerConfig::default()
        };
        let disk = 259 << 20;
        for (spill_wait_ns, placed_there, threshold, spill) in
            [(150_000, 1, 2, 1.5), (0, 1, 1, 0.0), (0, 2, 2, 0.0)]
        {
            let mut c = Control::new(
                &p,
                &cfg,
                None,
                topology_fingerprint(&p),
                BTreeMap::new(),
                vec![NodeWaits::default(); 2],
                None,
            )
            .unwrap();
            let mut io = BTreeMap::new();
            for locality in [Locality::Local, Locality::Remote] {
                io.insert(key(disk, locality, Op::Read), counters(&[10_000; 10]));
            }
            c.tick(&[placed_there, 2]);
            let waits = vec![
                NodeWaits {
                    io_waits: 10,
                    io_wait_ns: spill_wait_ns,
                    ..Default::default()
                },
                NodeWaits {
                    io_waits: 10,
                    io_wait_ns: 100_000,
                    ..Default::default()
                },
            ];
            let d = c.step(io, waits)[0].clone();
            assert_eq!(d.p_cont, Some(2.0));
            assert_eq!(d.spill_contention, spill, "{}", d.inputs_text());
            // What was learned: an exploration of one more may ride on it (at
            // 2, P_cont 2.0 sits 20 % below the spill's 2.5).
            let learned = d.threshold - u32::from(d.exploring);
            assert_eq!(learned, threshold, "{}", d.inputs_text());
        }
    }

    #[test]
    fn controls_the_device_node_and_saves_and_restores_it() {
        let dir = std::env::temp_dir().join(format!("esn-control-{}", std::process::id()));
        let path = dir.join("sub").join("learned.json");
        let p = plan();
        let fp = topology_fingerprint(&p);
        let cfg = ControllerConfig {
            confirm_intervals: 1,
            min_samples: 1,
            ..ControllerConfig::default()
        };
        let mut c = Control::new(
            &p,
            &cfg,
            Some(path.clone()),
            fp.clone(),
            BTreeMap::new(),
            vec![NodeWaits::default(); 2],
            None,
        )
        .unwrap();
        assert_eq!(c.initial_thresholds(), vec![(1, 2)]);

        // Two tasks placed, each waiting as long as a local request takes:
        // P_cont(2) = 2 > P_numa 1.0 measured, so the threshold goes down.
        let disk = 259 << 20;
        let mut io = BTreeMap::new();
        io.insert(
            key(disk, Locality::Local, Op::Read),
            counters(&[10_000; 10]),
        );
        io.insert(
            key(disk, Locality::Remote, Op::Read),
            counters(&[10_000; 10]),
        );
        c.tick(&[0, 2]);
        c.tick(&[0, 2]);
        let waits = vec![
            NodeWaits::default(),
            NodeWaits {
                io_waits: 10,
                io_wait_ns: 100_000,
                ..Default::default()
            },
        ];
        let d = c.step(io, waits)[0].clone();
        assert_eq!(d.node, 1);
        assert_eq!(d.placed, 2);
        assert_eq!(d.p_cont, Some(2.0));
        assert_eq!(d.threshold, 1, "{}", d.inputs_text());
        let line = crate::decisions_text(c.decisions(), &[2, 1]);
        assert!(
            line.starts_with("control n1: threshold 1 placed 2 | P_numa 1.00 measured"),
            "{line}"
        );

        c.save();
        // The running controller owns the file: a second one (profile --save,
        // another scheduler) is refused with what to do.
        let err = Control::new(
            &p,
            &cfg,
            Some(path.clone()),
            fp.clone(),
            BTreeMap::new(),
            Vec::new(),
            None,
        )
        .err()
        .expect("a second owner of the state file");
        assert!(
            err.to_string().contains("another scx_esn process")
                && err.to_string().contains("--state-file"),
            "{err}"
        );
        drop(c);
        let again = Control::new(
            &p,
            &cfg,
            Some(path.clone()),
            fp,
            BTreeMap::new(),
            Vec::new(),
            None,
        )
        .unwrap();
        assert_eq!(again.initial_thresholds(), vec![(1, 1)]);
        drop(again);
        // Another topology starts afresh from the CPU count.
        let other = Control::new(
            &p,
            &cfg,
            Some(path),
            "nodes 0:4cpu".into(),
            BTreeMap::new(),
            Vec::new(),
            None,
        )
        .unwrap();
        assert_eq!(other.initial_thresholds(), vec![(1, 2)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_was_learned_survives_a_cpu_going_offline_and_back() {
        let cfg = ControllerConfig::default();
        let mut full = plan();
        full.node_cpus[1] = 4;
        let mut fewer = full.clone();
        fewer.node_cpus[1] = 1;
        let (fp_full, fp_fewer) = (topology_fingerprint(&full), topology_fingerprint(&fewer));
        let start = |p: &Plan, fp: &str, carried: Option<&persist::LearnedState>| {
            Control::new(
                p,
                &cfg,
                None,
                fp.into(),
                BTreeMap::new(),
                Vec::new(),
                carried,
            )
            .unwrap()
        };
        let mut carried = CarriedState::default();
        let before = start(&full, &fp_full, None);
        assert_eq!(before.initial_thresholds(), vec![(1, 4)]);
        carried.keep(before.export());
        // Three CPUs go: node 1 has one, the learned threshold is clamped to its
        // bound (two tasks per CPU).
        let offline = start(&fewer, &fp_fewer, carried.for_topology(&fp_fewer));
        assert_eq!(offline.initial_thresholds(), vec![(1, 2)]);
        carried.keep(offline.export());
        // They come back: the state learned on four CPUs, not the clamped one.
        let back = start(&full, &fp_full, carried.for_topology(&fp_full));
        assert_eq!(back.initial_thresholds(), vec![(1, 4)]);
        assert_eq!(
            back.export(),
            carried.for_topology(&fp_full).unwrap().clone()
        );
    }

    #[test]
    fn an_unwritable_state_file_only_warns() {
        let p = plan();
        let mut c = Control::new(
            &p,
            &ControllerConfig::default(),
            Some(PathBuf::from("/proc/esn-cannot-write/learned.json")),
            "fp".into(),
            BTreeMap::new(),
            Vec::new(),
            None,
        )
        .expect("no lock where nothing can be written: a warning, not an error");
        c.save();
        c.save();
        assert!(c.save_failed);
    }
}
