// SPDX-License-Identifier: GPL-2.0-only
//! CPU energy per NUMA node: counted by the processor where it can (RAPL
//! through powercap), estimated from busy and idle time where it cannot.
//!
//! ```text
//!  Meter::discover(sysfs, proc_stat, cpu_node)
//!    ├─ RAPL  <sysfs>/class/powercap/*/name = "package-P" (or "package-P-die-D"),
//!    │        energy_uj readable (root): each package's µJ counter, its wrap
//!    │        at max_energy_range_uj, split over the nodes by their share
//!    │        of the package's online CPUs
//!    └─ model (labelled "estimated" everywhere it shows) per node, over t s:
//!             E = t x (b x W_busy + Σ_c i_c x W_c)
//!             b, i_c: the shares of the node's CPU time busy and idle in
//!             class c (/proc/stat ticks, idle split over C1 / C3 / C6 by
//!             cpuidle residency, cpuN/cpuidle/stateK/time)
//!  Meter::read() ─► Reading: joules per node since the meter started
//!  interval(before, now) ─► EnergyStats: joules and watts per node and in total
//! ```
//!
//! The watts are per socket, the research's defaults: 95 W busy, 47 W in C1,
//! 22 W in C3, 14 W in C6. So a node whose CPUs were all busy for a second
//! used 95 J, one whose CPUs slept in C6 for a second 14 J. The ticks give
//! shares, the clock gives the time: a guest whose vCPUs wait for the host
//! accounts fewer ticks than seconds passed (under TCG, 1.7 s of ticks per
//! CPU in 3 s), yet its sockets drew power all along.
//!
//! Every reading adds the energy since the previous one to running totals,
//! so a reader differences totals like every other counter. A RAPL counter
//! that wrapped more than once between two readings loses the extra turns
//! (one turn is 262 kJ on most parts: over 20 minutes at 200 W); the
//! scheduler reads at least every [`KEEP_UP_EVERY`].

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use esn_stats::energy::{EnergySource, EnergyStats, NodeEnergy};

use crate::cpustat::{self, NodeTicks};

/// How often the owner of a meter should read it even when nobody asks, so
/// that no RAPL counter wraps twice unseen.
pub const KEEP_UP_EVERY: Duration = Duration::from_secs(60);

/// Per-socket power of each CPU state, in watts (the model's inputs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Watts {
    pub busy: f64,
    pub c1: f64,
    pub c3: f64,
    pub c6: f64,
}

impl Default for Watts {
    /// The research's measurements.
    fn default() -> Watts {
        Watts {
            busy: 95.0,
            c1: 47.0,
            c3: 22.0,
            c6: 14.0,
        }
    }
}

impl std::fmt::Display for Watts {
    /// As --energy-watts takes them: "95,47,22,14".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{},{},{}", self.busy, self.c1, self.c3, self.c6)
    }
}

impl std::str::FromStr for Watts {
    type Err = String;

    /// "BUSY,C1,C3,C6", e.g. "95,47,22,14".
    fn from_str(text: &str) -> std::result::Result<Watts, String> {
        let values: Vec<f64> = text
            .split(',')
            .map(|v| v.trim().parse::<f64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| format!("{text:?}: expected four numbers BUSY,C1,C3,C6 (watts)"))?;
        let [busy, c1, c3, c6] = values[..] else {
            return Err(format!(
                "{text:?}: expected four numbers BUSY,C1,C3,C6 (watts), got {}",
                values.len()
            ));
        };
        if values
            .iter()
            .any(|w| !w.is_finite() || *w < 0.0 || *w > 10_000.0)
        {
            return Err(format!("{text:?}: each watt figure must be 0-10000"));
        }
        Ok(Watts { busy, c1, c3, c6 })
    }
}

/// Which source the meter uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// RAPL where readable, else the model.
    Auto,
    /// Always the model (to compare it with RAPL, or where RAPL misleads).
    Model,
}

/// The idle classes of the model, shallowest first.
const C1: usize = 0;
const C3: usize = 1;
const C6: usize = 2;

/// The model's class of a cpuidle state by its name: C0/C1/C1E -> C1,
/// C2/C3 -> C3, C4 and deeper -> C6; POLL and names without a C number
/// count as the shallowest (C1), which never under-estimates.
fn idle_class(name: &str) -> usize {
    let digits: String = name
        .trim()
        .strip_prefix('C')
        .unwrap_or("")
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    match digits.parse::<u32>() {
        Ok(0..=1) | Err(_) => C1,
        Ok(2..=3) => C3,
        Ok(_) => C6,
    }
}

/// One package's counter and the nodes it powers.
#[derive(Debug)]
struct Zone {
    energy_uj: PathBuf,
    max_range_uj: u64,
    /// (node, share of the package's online CPUs on it).
    shares: Vec<(usize, f64)>,
}

/// The residency file of one cpuidle state and its class.
#[derive(Debug)]
struct IdleState {
    node: usize,
    class: usize,
    time_us: PathBuf,
}

#[derive(Debug)]
enum Source {
    Rapl(Vec<Zone>),
    Model {
        watts: Watts,
        proc_stat: PathBuf,
        cpu_node: Vec<u8>,
        states: Vec<IdleState>,
    },
}

/// What the meter saw at its previous reading.
#[derive(Debug, Default)]
struct State {
    /// Per zone (RAPL).
    last_uj: Vec<Option<u64>>,
    /// Per node (model).
    last_ticks: Vec<NodeTicks>,
    last_residency_us: Vec<[u64; 3]>,
    /// When the previous reading was taken.
    last_at: Option<Instant>,
    /// Joules per node since the meter started.
    joules: Vec<f64>,
}

/// Counts the CPUs' energy per node.
#[derive(Debug)]
pub struct Meter {
    source: Source,
    nr_nodes: usize,
    /// Nodes with at least one CPU: the only ones reported.
    nodes_with_cpus: Vec<usize>,
    state: Mutex<State>,
}

/// The meter's totals at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub source: EnergySource,
    pub taken: Instant,
    /// Joules since the meter started, per node with CPUs: (node, joules).
    pub joules: Vec<(u32, f64)>,
}

impl Meter {
    /// The meter of this machine. `cpu_node[cpu]` is each CPU's node (as the
    /// scheduler's plan has it). The second value says why RAPL is not used,
    /// when the model is (for one log line).
    pub fn discover(
        sysfs: &Path,
        proc_stat: &Path,
        cpu_node: &[u8],
        mode: Mode,
        watts: Watts,
    ) -> (Meter, Option<String>) {
        let nr_nodes = cpu_node.iter().map(|&n| n as usize + 1).max().unwrap_or(0);
        let (source, why_not_rapl) = match mode {
            Mode::Model => (None, Some("--energy-model given".to_string())),
            Mode::Auto => match rapl_zones(sysfs, cpu_node) {
                Ok(zones) => (Some(Source::Rapl(zones)), None),
                Err(err) => (None, Some(format!("{err:#}"))),
            },
        };
        let source = source.unwrap_or_else(|| Source::Model {
            watts,
            proc_stat: proc_stat.to_path_buf(),
            cpu_node: cpu_node.to_vec(),
            states: idle_states(sysfs, cpu_node),
        });
        let ticks = cpustat::read_from(proc_stat, cpu_node, nr_nodes);
        let nodes_with_cpus = (0..nr_nodes)
            .filter(|&n| ticks.get(n).is_some_and(|t| t.cpus > 0))
            .collect();
        let meter = Meter {
            source,
            nr_nodes,
            nodes_with_cpus,
            state: Mutex::new(State {
                joules: vec![0.0; nr_nodes],
                ..State::default()
            }),
        };
        // The first reading only sets the starting points.
        meter.read();
        (meter, why_not_rapl)
    }

    pub fn source(&self) -> EnergySource {
        match self.source {
            Source::Rapl(_) => EnergySource::Rapl,
            Source::Model { .. } => EnergySource::Estimated,
        }
    }

    /// Adds the energy since the previous reading and returns the totals.
    pub fn read(&self) -> Reading {
        self.read_at(Instant::now(), None)
    }

    /// [`Meter::read`] with the model's busy ticks taken from `ticks`, a
    /// /proc/stat reading the caller just took for the same CPU -> node map
    /// (the scheduler's busy %): one read of /proc/stat per tick, not two.
    pub fn read_with_ticks(&self, ticks: &[NodeTicks]) -> Reading {
        self.read_at(Instant::now(), Some(ticks))
    }

    /// [`Meter::read`], as if taken at `taken` (the tests' clock), with the
    /// model's ticks from `ticks` when given.
    fn read_at(&self, taken: Instant, ticks: Option<&[NodeTicks]>) -> Reading {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed_s = state
            .last_at
            .and_then(|last| taken.checked_duration_since(last))
            .map_or(0.0, |d| d.as_secs_f64());
        state.last_at = Some(taken);
        match &self.source {
            Source::Rapl(zones) => self.add_rapl(zones, &mut state),
            Source::Model {
                watts,
                proc_stat,
                cpu_node,
                states,
            } => {
                let ticks = ticks.map_or_else(
                    || cpustat::read_from(proc_stat, cpu_node, self.nr_nodes),
                    <[NodeTicks]>::to_vec,
                );
                let residency = residency_by_node(states, self.nr_nodes);
                log::debug!("energy model: ticks {ticks:?}, residency {residency:?}");
                add_model(watts, &ticks, &residency, elapsed_s, &mut state);
                state.last_ticks = ticks;
                state.last_residency_us = residency;
            }
        }
        Reading {
            source: self.source(),
            taken,
            joules: self
                .nodes_with_cpus
                .iter()
                .map(|&n| (n as u32, state.joules[n]))
                .collect(),
        }
    }

    fn add_rapl(&self, zones: &[Zone], state: &mut State) {
        state.last_uj.resize(zones.len(), None);
        for (zone, last) in zones.iter().zip(state.last_uj.iter_mut()) {
            let now = read_u64(&zone.energy_uj).ok();
            if let (Some(before), Some(now)) = (*last, now) {
                let uj = wrapped_delta(before, now, zone.max_range_uj);
                for &(node, share) in &zone.shares {
                    state.joules[node] += uj as f64 * 1e-6 * share;
                }
            }
            *last = now;
        }
    }
}

/// A counter's advance from `before` to `now`, across one wrap at `max`.
fn wrapped_delta(before: u64, now: u64, max: u64) -> u64 {
    if now >= before {
        now - before
    } else {
        max.saturating_sub(before).saturating_add(now)
    }
}

/// The model's joules over the `elapsed_s` since the previous reading, per
/// node. A node whose CPU count changed in between (hotplug) adds nothing
/// for that interval.
fn add_model(
    watts: &Watts,
    ticks: &[NodeTicks],
    residency: &[[u64; 3]],
    elapsed_s: f64,
    state: &mut State,
) {
    for (node, (now, before)) in ticks.iter().zip(&state.last_ticks).enumerate() {
        if now.cpus == 0 || now.cpus != before.cpus {
            continue;
        }
        let (Some(total), Some(busy)) = (
            now.total.checked_sub(before.total),
            now.busy.checked_sub(before.busy),
        ) else {
            continue;
        };
        if total == 0 {
            continue;
        }
        let busy_share = busy as f64 / total as f64;
        let idle_share = 1.0 - busy_share;
        let mut in_class = [0u64; 3];
        if let (Some(r_now), Some(r_before)) =
            (residency.get(node), state.last_residency_us.get(node))
        {
            for c in 0..3 {
                in_class[c] = r_now[c].saturating_sub(r_before[c]);
            }
        }
        let all: u64 = in_class.iter().sum();
        let class_watts = [watts.c1, watts.c3, watts.c6];
        let idle_watts = if all == 0 {
            watts.c1
        } else {
            (0..3)
                .map(|c| in_class[c] as f64 / all as f64 * class_watts[c])
                .sum()
        };
        state.joules[node] += elapsed_s * (busy_share * watts.busy + idle_share * idle_watts);
    }
}

/// The interval between two readings of one meter; `None` when they are not
/// from the same source or no time passed.
pub fn interval(before: &Reading, now: &Reading) -> Option<EnergyStats> {
    let elapsed = now
        .taken
        .checked_duration_since(before.taken)?
        .as_secs_f64();
    if before.source != now.source || elapsed <= 0.0 {
        return None;
    }
    let nodes: Vec<NodeEnergy> = now
        .joules
        .iter()
        .map(|&(node, j)| {
            let start = before
                .joules
                .iter()
                .find(|(n, _)| *n == node)
                .map_or(0.0, |(_, j)| *j);
            let joules = (j - start).max(0.0);
            NodeEnergy {
                node,
                joules,
                watts: joules / elapsed,
            }
        })
        .collect();
    let joules = nodes.iter().map(|n| n.joules).sum::<f64>();
    Some(EnergyStats {
        source: now.source,
        nodes,
        joules,
        watts: joules / elapsed,
        joules_per_io: None,
        tradeoff: None,
    })
}

fn read_u64(path: &Path) -> Result<u64> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{}: not a number: {:?}", path.display(), text.trim()))
}

/// "package-P" or "package-P-die-D".
fn parse_package_name(name: &str) -> Option<(u32, Option<u32>)> {
    let rest = name.trim().strip_prefix("package-")?;
    match rest.split_once("-die-") {
        Some((p, d)) => Some((p.parse().ok()?, Some(d.parse().ok()?))),
        None => Some((rest.parse().ok()?, None)),
    }
}

/// The package zones of RAPL, each with its nodes' shares. An error says why
/// there are none usable (no powercap, no package zone, not readable).
fn rapl_zones(sysfs: &Path, cpu_node: &[u8]) -> Result<Vec<Zone>> {
    let dir = sysfs.join("class/powercap");
    // Said on an info line at every start: no raw OS error text, which log
    // scanners take for a failure.
    let Ok(entries) = std::fs::read_dir(&dir) else {
        bail!("no powercap zones ({} absent or unreadable)", dir.display());
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // intel-rapl:N before intel-rapl-mmio:N, which repeats a package on
    // some parts; one counter per package.
    names.sort_by_key(|n| (!n.starts_with("intel-rapl:"), n.clone()));
    let cpus = cpu_packages(sysfs, cpu_node);
    let mut seen = Vec::new();
    let mut zones = Vec::new();
    let mut unreadable = None;
    for name in names {
        let zone_dir = dir.join(&name);
        let Some(package) = std::fs::read_to_string(zone_dir.join("name"))
            .ok()
            .and_then(|n| parse_package_name(&n))
        else {
            continue;
        };
        if seen.contains(&package) {
            continue;
        }
        let energy_uj = zone_dir.join("energy_uj");
        if read_u64(&energy_uj).is_err() {
            unreadable.get_or_insert(energy_uj);
            continue;
        }
        let max_range_uj = read_u64(&zone_dir.join("max_energy_range_uj"))?;
        let mine: Vec<usize> = cpus
            .iter()
            .filter(|c| c.package == package.0 && package.1.is_none_or(|d| c.die == d))
            .map(|c| c.node)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let mut shares: Vec<(usize, f64)> = Vec::new();
        for &node in &mine {
            match shares.iter_mut().find(|(n, _)| *n == node) {
                Some((_, s)) => *s += 1.0 / mine.len() as f64,
                None => shares.push((node, 1.0 / mine.len() as f64)),
            }
        }
        seen.push(package);
        zones.push(Zone {
            energy_uj,
            max_range_uj,
            shares,
        });
    }
    if zones.is_empty() {
        match unreadable {
            Some(path) => bail!(
                "RAPL counters not readable: {} (root only since Linux 5.10)",
                path.display()
            ),
            None => bail!(
                "no RAPL package zone with online CPUs under {}",
                dir.display()
            ),
        }
    }
    Ok(zones)
}

struct CpuPackage {
    node: usize,
    package: u32,
    die: u32,
}

/// The online CPUs' packages (an offline CPU has no topology directory).
fn cpu_packages(sysfs: &Path, cpu_node: &[u8]) -> Vec<CpuPackage> {
    cpu_node
        .iter()
        .enumerate()
        .filter_map(|(cpu, &node)| {
            let topo = sysfs.join(format!("devices/system/cpu/cpu{cpu}/topology"));
            let package = read_u64(&topo.join("physical_package_id")).ok()? as u32;
            let die = read_u64(&topo.join("die_id")).map_or(0, |d| d as u32);
            Some(CpuPackage {
                node: node as usize,
                package,
                die,
            })
        })
        .collect()
}

/// Every cpuidle state of every CPU, with its class.
fn idle_states(sysfs: &Path, cpu_node: &[u8]) -> Vec<IdleState> {
    let mut out = Vec::new();
    for (cpu, &node) in cpu_node.iter().enumerate() {
        let dir = sysfs.join(format!("devices/system/cpu/cpu{cpu}/cpuidle"));
        for k in 0.. {
            let state = dir.join(format!("state{k}"));
            let Ok(name) = std::fs::read_to_string(state.join("name")) else {
                break;
            };
            out.push(IdleState {
                node: node as usize,
                class: idle_class(&name),
                time_us: state.join("time"),
            });
        }
    }
    out
}

/// Microseconds spent in each idle class, per node, since boot.
fn residency_by_node(states: &[IdleState], nr_nodes: usize) -> Vec<[u64; 3]> {
    let mut out = vec![[0u64; 3]; nr_nodes];
    for s in states {
        if let (Some(slot), Ok(us)) = (out.get_mut(s.node), read_u64(&s.time_us)) {
            slot[s.class] += us;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /proc/stat and sysfs: 2 nodes x 2 CPUs, one package per node.
    struct Tree {
        dir: tempfile::TempDir,
    }

    const CPU_NODE: [u8; 4] = [0, 0, 1, 1];

    impl Tree {
        fn new() -> Tree {
            let tree = Tree {
                dir: tempfile::tempdir().unwrap(),
            };
            for cpu in 0..4 {
                let topo = tree
                    .sys()
                    .join(format!("devices/system/cpu/cpu{cpu}/topology"));
                std::fs::create_dir_all(&topo).unwrap();
                std::fs::write(topo.join("physical_package_id"), format!("{}\n", cpu / 2)).unwrap();
                std::fs::write(topo.join("die_id"), "0\n").unwrap();
            }
            // Every CPU idle, nothing counted yet.
            tree.set_stat(&[(0, 0); 4]);
            tree
        }

        fn sys(&self) -> PathBuf {
            self.dir.path().join("sys")
        }

        fn stat(&self) -> PathBuf {
            self.dir.path().join("stat")
        }

        /// Per CPU: (busy ticks, idle ticks).
        fn set_stat(&self, cpus: &[(u64, u64)]) {
            let mut text = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
            for (cpu, (busy, idle)) in cpus.iter().enumerate() {
                text += &format!("cpu{cpu} {busy} 0 0 {idle} 0 0 0 0 0 0\n");
            }
            std::fs::write(self.stat(), text).unwrap();
        }

        fn set_idle(&self, cpu: u32, state: u32, name: &str, time_us: u64) {
            let dir = self
                .sys()
                .join(format!("devices/system/cpu/cpu{cpu}/cpuidle/state{state}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("name"), format!("{name}\n")).unwrap();
            std::fs::write(dir.join("time"), format!("{time_us}\n")).unwrap();
        }

        fn set_zone(&self, zone: &str, name: &str, uj: u64, max: u64) {
            let dir = self.sys().join("class/powercap").join(zone);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("name"), format!("{name}\n")).unwrap();
            std::fs::write(dir.join("energy_uj"), format!("{uj}\n")).unwrap();
            std::fs::write(dir.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
        }

        fn meter(&self, mode: Mode) -> (Meter, Option<String>) {
            Meter::discover(&self.sys(), &self.stat(), &CPU_NODE, mode, Watts::default())
        }
    }

    fn joules_of(r: &Reading, node: u32) -> f64 {
        r.joules.iter().find(|(n, _)| *n == node).unwrap().1
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Ticks handed in (the scheduler's own /proc/stat reading) give what
    /// the meter's own read of the same file gives; the file is not read.
    #[test]
    fn model_takes_the_callers_ticks() {
        let tree = Tree::new();
        let (own, _) = tree.meter(Mode::Auto);
        let (handed, _) = tree.meter(Mode::Auto);
        let t0 = Instant::now();
        let ticks = cpustat::read_from(&tree.stat(), &CPU_NODE, 2);
        own.read_at(t0, None);
        handed.read_at(t0, Some(&ticks));
        tree.set_stat(&[(100, 0), (50, 50), (25, 75), (0, 100)]);
        let ticks = cpustat::read_from(&tree.stat(), &CPU_NODE, 2);
        let later = t0 + Duration::from_secs(1);
        let from_file = own.read_at(later, None);
        // The file now says otherwise: a meter that read it would differ.
        tree.set_stat(&[(0, 100); 4]);
        let from_ticks = handed.read_at(later, Some(&ticks));
        for node in [0, 1] {
            assert!(
                close(joules_of(&from_file, node), joules_of(&from_ticks, node)),
                "{from_file:?} {from_ticks:?}"
            );
        }
        assert!(joules_of(&from_ticks, 0) > 0.0);
    }

    #[test]
    fn model_matches_a_hand_computation() {
        let tree = Tree::new();
        for cpu in 0..4 {
            tree.set_idle(cpu, 0, "POLL", 0);
            tree.set_idle(cpu, 1, "C1", 0);
            tree.set_idle(cpu, 2, "C6", 0);
        }
        let (meter, why) = tree.meter(Mode::Auto);
        let why = why.unwrap();
        assert!(why.contains("powercap"), "no RAPL tree here: {why}");
        assert!(!why.to_lowercase().contains("error"), "{why}");
        assert_eq!(meter.source(), EnergySource::Estimated);
        let t0 = Instant::now();
        let start = meter.read_at(t0, None);
        // One second (100 ticks per CPU at USER_HZ 100). Node 0: CPU 0 busy
        // all along, CPU 1 idle 1 s, all of it in C6. Node 1: both CPUs
        // busy 0.25 s and idle 0.75 s, idle residency 1:3 in C1:C6.
        tree.set_stat(&[(100, 0), (0, 100), (25, 75), (25, 75)]);
        tree.set_idle(1, 2, "C6", 1_000_000);
        for cpu in [2, 3] {
            tree.set_idle(cpu, 1, "C1", 187_500);
            tree.set_idle(cpu, 2, "C6", 562_500);
        }
        let now = meter.read_at(t0 + Duration::from_secs(1), None);
        // Node 0, half its CPU time busy, half idle in C6, for 1 s:
        // 1 x (0.5 x 95 + 0.5 x 14) = 54.5 J.
        assert!(close(joules_of(&now, 0), 54.5), "{now:?}");
        // Node 1: a quarter busy, three quarters idle, 1:3 in C1:C6:
        // 1 x (0.25 x 95 + 0.75 x (0.25 x 47 + 0.75 x 14)) = 23.75 + 16.6875.
        assert!(close(joules_of(&now, 1), 40.4375), "{now:?}");
        let stats = interval(&start, &now).unwrap();
        assert_eq!(stats.source, EnergySource::Estimated);
        assert!(close(stats.joules, 54.5 + 40.4375));
        assert_eq!(stats.nodes.len(), 2);
    }

    #[test]
    fn model_without_cpuidle_counts_idle_as_c1() {
        let tree = Tree::new();
        let (meter, _) = tree.meter(Mode::Auto);
        let t0 = Instant::now();
        meter.read_at(t0, None);
        tree.set_stat(&[(0, 200), (0, 200), (200, 0), (200, 0)]);
        let now = meter.read_at(t0 + Duration::from_secs(2), None);
        // Two seconds: node 0 idle (C1 47 W), node 1 busy (95 W).
        assert!(close(joules_of(&now, 0), 94.0), "{now:?}");
        assert!(close(joules_of(&now, 1), 190.0), "{now:?}");
    }

    #[test]
    fn ticks_give_shares_and_the_clock_gives_time() {
        // A guest whose vCPUs wait for the host: 3 s pass, each CPU
        // accounts 1.7 s of ticks, all busy. Its sockets drew 3 s of power.
        let tree = Tree::new();
        let (meter, _) = tree.meter(Mode::Auto);
        let t0 = Instant::now();
        meter.read_at(t0, None);
        tree.set_stat(&[(170, 0); 4]);
        let now = meter.read_at(t0 + Duration::from_secs(3), None);
        assert!(close(joules_of(&now, 0), 285.0), "{now:?}");
        assert!(close(joules_of(&now, 1), 285.0), "{now:?}");
    }

    #[test]
    fn idle_state_names_map_to_classes() {
        assert_eq!(idle_class("POLL"), C1);
        assert_eq!(idle_class("C1E\n"), C1);
        assert_eq!(idle_class("C2"), C3);
        assert_eq!(idle_class("C3"), C3);
        assert_eq!(idle_class("C6S"), C6);
        assert_eq!(idle_class("C10"), C6);
        assert_eq!(idle_class("WFI"), C1);
    }

    #[test]
    fn hotplug_between_readings_adds_nothing_for_that_node() {
        let tree = Tree::new();
        let (meter, _) = tree.meter(Mode::Auto);
        let t0 = Instant::now();
        meter.read_at(t0, None);
        // CPU 3 went offline: its line is gone.
        std::fs::write(
            tree.stat(),
            "cpu0 100 0 0 0 0 0 0 0\ncpu1 100 0 0 0 0 0 0 0\ncpu2 100 0 0 0 0 0 0 0\n",
        )
        .unwrap();
        let now = meter.read_at(t0 + Duration::from_secs(1), None);
        assert!(close(joules_of(&now, 0), 95.0));
        assert!(close(joules_of(&now, 1), 0.0));
    }

    #[test]
    fn rapl_splits_packages_over_nodes_and_handles_the_wrap() {
        let tree = Tree::new();
        tree.set_zone("intel-rapl:0", "package-0", 1_000_000, 10_000_000);
        tree.set_zone("intel-rapl:1", "package-1", 9_500_000, 10_000_000);
        // Sub-zones and a second view of package 0 are not counted again.
        tree.set_zone("intel-rapl:0:0", "core", 5, 10_000_000);
        tree.set_zone("intel-rapl-mmio:0", "package-0", 7, 10_000_000);
        let (meter, why) = tree.meter(Mode::Auto);
        assert_eq!(why, None);
        assert_eq!(meter.source(), EnergySource::Rapl);
        let start = meter.read();
        tree.set_zone("intel-rapl:0", "package-0", 3_500_000, 10_000_000);
        // Wrapped: 0.5 J to the top, then 1 J.
        tree.set_zone("intel-rapl:1", "package-1", 1_000_000, 10_000_000);
        let now = meter.read();
        assert!(close(joules_of(&now, 0), 2.5), "{now:?}");
        assert!(close(joules_of(&now, 1), 1.5), "{now:?}");
        let stats = interval(&start, &now).unwrap();
        assert_eq!(stats.source, EnergySource::Rapl);
        assert!(close(stats.joules, 4.0));
    }

    #[test]
    fn a_package_over_two_nodes_is_split_by_cpus() {
        let tree = Tree::new();
        // One package for all four CPUs (sub-NUMA clustering).
        for cpu in 0..4 {
            std::fs::write(
                tree.sys().join(format!(
                    "devices/system/cpu/cpu{cpu}/topology/physical_package_id"
                )),
                "0\n",
            )
            .unwrap();
        }
        tree.set_zone("intel-rapl:0", "package-0", 0, 1 << 40);
        let (meter, _) = tree.meter(Mode::Auto);
        tree.set_zone("intel-rapl:0", "package-0", 8_000_000, 1 << 40);
        let now = meter.read();
        assert!(close(joules_of(&now, 0), 4.0));
        assert!(close(joules_of(&now, 1), 4.0));
    }

    #[test]
    fn unreadable_rapl_falls_back_to_the_model_and_says_why() {
        let tree = Tree::new();
        tree.set_zone("intel-rapl:0", "package-0", 0, 100);
        std::fs::remove_file(tree.sys().join("class/powercap/intel-rapl:0/energy_uj")).unwrap();
        let (meter, why) = tree.meter(Mode::Auto);
        assert_eq!(meter.source(), EnergySource::Estimated);
        let why = why.unwrap();
        assert!(why.contains("not readable"), "{why}");
        // An info line at every start: log scanners must not read a failure.
        assert!(!why.to_lowercase().contains("error"), "{why}");
        let (meter, why) = {
            let t = Tree::new();
            t.set_zone("intel-rapl:0", "package-0", 0, 100);
            let m = t.meter(Mode::Model);
            (m.0, m.1)
        };
        assert_eq!(meter.source(), EnergySource::Estimated);
        assert!(why.unwrap().contains("--energy-model"));
    }

    #[test]
    fn watts_parse_and_reject() {
        assert_eq!("95,47,22,14".parse::<Watts>(), Ok(Watts::default()));
        assert_eq!(Watts::default().to_string(), "95,47,22,14");
        assert!("95,47,22".parse::<Watts>().is_err());
        assert!("95,47,x,14".parse::<Watts>().is_err());
        assert!("95,47,-1,14".parse::<Watts>().is_err());
    }

    #[test]
    fn no_proc_stat_is_no_panic() {
        let dir = tempfile::tempdir().unwrap();
        let (meter, _) = Meter::discover(
            dir.path(),
            &dir.path().join("missing"),
            &CPU_NODE,
            Mode::Auto,
            Watts::default(),
        );
        let r = meter.read();
        assert!(r.joules.is_empty());
        assert_eq!(interval(&r, &meter.read()).unwrap().joules, 0.0);
    }
}
