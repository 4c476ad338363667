// SPDX-License-Identifier: GPL-2.0-only
//! The `--dvfs` loop: per node, its devices' utilisation decides its CPUs'
//! frequency limit (see the crate's doc for the rule).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use log::{debug, warn};

use crate::cpufreq::{self, CpuFreq, Record, SavedLimit};

/// The command line's part.
#[derive(Debug, Clone)]
pub struct DvfsConfig {
    /// How often the devices' utilisation is sampled.
    pub interval: Duration,
    /// Utilisation (0-1) at or above which a node's CPUs step down.
    pub util_threshold: f64,
    /// One step where the driver lists no frequencies, in kHz.
    pub step_khz: u64,
    /// Where the limits found at start are kept while any is changed.
    pub record: PathBuf,
}

/// A node and what it has: its CPUs and the block devices (names under
/// /sys/block) whose home it is.
#[derive(Debug, Clone)]
pub struct NodeInput {
    pub node: u32,
    pub cpus: Vec<u32>,
    pub devices: Vec<String>,
}

#[derive(Debug)]
struct ManagedCpu {
    freq: CpuFreq,
    original_khz: u64,
    current_khz: u64,
}

#[derive(Debug)]
struct ManagedNode {
    node: u32,
    cpus: Vec<ManagedCpu>,
    stat_paths: Vec<PathBuf>,
    /// io_ticks (ms) of each device at the last sample; None: unreadable.
    last_ticks: Vec<Option<u64>>,
}

impl ManagedNode {
    /// The busiest device's utilisation since the last sample (0-1), and the
    /// new readings kept for the next one.
    fn sample(&mut self, elapsed: Duration) -> Option<f64> {
        let ms = elapsed.as_secs_f64() * 1000.0;
        let mut busiest: Option<f64> = None;
        for (path, last) in self.stat_paths.iter().zip(self.last_ticks.iter_mut()) {
            let now = std::fs::read_to_string(path)
                .ok()
                .and_then(|text| esn_stats::snapshot::io_ticks_from_stat(&text));
            if let (Some(before), Some(after)) = (*last, now) {
                if ms > 0.0 {
                    let util = (after.saturating_sub(before) as f64 / ms).clamp(0.0, 1.0);
                    busiest = Some(busiest.map_or(util, |b| b.max(util)));
                }
            }
            *last = now;
        }
        busiest
    }
}

/// What `Dvfs::start` found.
#[derive(Debug)]
pub enum Start {
    On(Dvfs),
    /// Nothing to do here, and why (said once by the caller).
    Off(String),
}

/// The running state; dropping it puts every limit back.
#[derive(Debug)]
pub struct Dvfs {
    config: DvfsConfig,
    nodes: Vec<ManagedNode>,
    last_sample: Option<Instant>,
    record_written: bool,
    finished: bool,
    steps_down: u64,
}

impl Dvfs {
    /// Find the nodes that have both devices and cpufreq. A record left by
    /// a run that did not exit cleanly (SIGKILL) is restored first: it holds
    /// the limits as they were before that run, which are the ones to keep.
    pub fn start(sysfs: &Path, nodes: &[NodeInput], config: DvfsConfig) -> Result<Start> {
        if config.record.exists() {
            match cpufreq::restore_from_record(sysfs, &config.record)? {
                Some(done) if !done.failed.is_empty() => {
                    return Ok(Start::Off(format!(
                        "{} holds CPU frequency limits left lowered by an earlier run, and \
                         {} of them cannot be written back ({}); run `scx_esn restore-freq` \
                         once they can be",
                        config.record.display(),
                        done.failed.len(),
                        done.failures()
                    )));
                }
                Some(done) => warn!(
                    "--dvfs: put back the CPU frequency limits of {} CPUs left lowered by an \
                     earlier run that did not exit cleanly ({})",
                    done.restored.len(),
                    config.record.display()
                ),
                None => {}
            }
        }
        let mut managed = Vec::new();
        let mut any_cpufreq = false;
        for input in nodes {
            let mut cpus = Vec::new();
            for &cpu in &input.cpus {
                let Some(freq) = CpuFreq::read(sysfs, cpu)? else {
                    continue;
                };
                any_cpufreq = true;
                let limit = freq.limit()?;
                cpus.push(ManagedCpu {
                    freq,
                    original_khz: limit,
                    current_khz: limit,
                });
            }
            if cpus.is_empty() || input.devices.is_empty() {
                continue;
            }
            let stat_paths: Vec<PathBuf> = input
                .devices
                .iter()
                .map(|name| sysfs.join("block").join(name).join("stat"))
                .collect();
            managed.push(ManagedNode {
                node: input.node,
                last_ticks: vec![None; stat_paths.len()],
                stat_paths,
                cpus,
            });
        }
        if !any_cpufreq {
            return Ok(Start::Off(format!(
                "no CPU has cpufreq ({}): frequency limits cannot be set on this machine \
                 (a VM, or no cpufreq driver loaded)",
                cpufreq::cpufreq_dir(sysfs, 0).display()
            )));
        }
        if managed.is_empty() {
            return Ok(Start::Off(
                "no node has both a block device and CPUs with cpufreq: nothing to slow".into(),
            ));
        }
        Ok(Start::On(Dvfs {
            config,
            nodes: managed,
            last_sample: None,
            record_written: false,
            finished: false,
            steps_down: 0,
        }))
    }

    /// The nodes under control.
    pub fn nodes(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.node).collect()
    }

    /// Steps down taken since start, all nodes.
    pub fn steps_down(&self) -> u64 {
        self.steps_down
    }

    /// Each managed node's lowest CPU limit now and highest original, kHz.
    pub fn limits(&self) -> Vec<(u32, u64, u64)> {
        self.nodes
            .iter()
            .map(|n| {
                let now = n.cpus.iter().map(|c| c.current_khz).min().unwrap_or(0);
                let orig = n.cpus.iter().map(|c| c.original_khz).max().unwrap_or(0);
                (n.node, now, orig)
            })
            .collect()
    }

    /// Sample and act if an interval has passed since the last sample. An
    /// error (a limit that cannot be written) leaves the limits as they were
    /// found; the caller then drops DVFS.
    pub fn tick(&mut self, now: Instant) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        let elapsed = match self.last_sample {
            Some(at) if now.duration_since(at) < self.config.interval => return Ok(()),
            Some(at) => now.duration_since(at),
            None => Duration::ZERO,
        };
        self.last_sample = Some(now);
        for i in 0..self.nodes.len() {
            let Some(util) = self.nodes[i].sample(elapsed) else {
                continue;
            };
            let result = if util >= self.config.util_threshold {
                self.step_down(i, util)
            } else {
                self.back_to_original(i)
            };
            if let Err(err) = result {
                let restored = self.restore();
                let hint = if cpufreq::is_permission_error(&err) {
                    " (scx_esn needs root, and sysfs writable)"
                } else {
                    ""
                };
                return Err(err).with_context(|| {
                    format!(
                        "--dvfs: a CPU frequency limit cannot be set{hint}; limits put back: {}",
                        match restored {
                            Ok(()) => "yes".to_string(),
                            Err(e) => format!("not all ({e:#})"),
                        }
                    )
                });
            }
        }
        Ok(())
    }

    fn ensure_record(&mut self) -> Result<()> {
        if self.record_written {
            return Ok(());
        }
        let limits = self
            .nodes
            .iter()
            .flat_map(|n| &n.cpus)
            .map(|c| SavedLimit {
                cpu: c.freq.cpu,
                khz: c.original_khz,
            })
            .collect();
        Record { limits }.write(&self.config.record)?;
        self.record_written = true;
        Ok(())
    }

    fn step_down(&mut self, i: usize, util: f64) -> Result<()> {
        let step = self.config.step_khz;
        let wanted: Vec<u64> = self.nodes[i]
            .cpus
            .iter()
            .map(|c| c.freq.step_down(c.current_khz, step))
            .collect();
        if wanted
            .iter()
            .zip(&self.nodes[i].cpus)
            .all(|(w, c)| *w == c.current_khz)
        {
            return Ok(());
        }
        self.ensure_record()?;
        let node = &mut self.nodes[i];
        for (cpu, khz) in node.cpus.iter_mut().zip(wanted) {
            if khz != cpu.current_khz {
                cpu.freq.set_limit(khz)?;
                cpu.current_khz = khz;
            }
        }
        self.steps_down += 1;
        debug!(
            "--dvfs: node {} devices {:.1} % busy: CPUs one step down",
            node.node,
            util * 100.0
        );
        Ok(())
    }

    fn back_to_original(&mut self, i: usize) -> Result<()> {
        let node = &mut self.nodes[i];
        let mut changed = false;
        for cpu in node
            .cpus
            .iter_mut()
            .filter(|c| c.current_khz != c.original_khz)
        {
            cpu.freq.set_limit(cpu.original_khz)?;
            cpu.current_khz = cpu.original_khz;
            changed = true;
        }
        if changed {
            debug!("--dvfs: node {}: CPUs back to their limits", node.node);
        }
        Ok(())
    }

    /// Put every limit we changed back and remove the record. Called on every
    /// way out (and by Drop); a CPU that cannot be written stays in the
    /// record for `scx_esn restore-freq`.
    pub fn restore(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        let mut left = Vec::new();
        let mut why = Vec::new();
        for cpu in self.nodes.iter_mut().flat_map(|n| n.cpus.iter_mut()) {
            if cpu.current_khz == cpu.original_khz {
                continue;
            }
            match cpu.freq.set_limit(cpu.original_khz) {
                Ok(()) => cpu.current_khz = cpu.original_khz,
                Err(err) => {
                    why.push(format!("cpu{}: {err:#}", cpu.freq.cpu));
                    left.push(SavedLimit {
                        cpu: cpu.freq.cpu,
                        khz: cpu.original_khz,
                    });
                }
            }
        }
        if !self.record_written {
            return Ok(());
        }
        let record = &self.config.record;
        if left.is_empty() {
            return std::fs::remove_file(record)
                .with_context(|| format!("removing {}", record.display()));
        }
        Record { limits: left }.write(record)?;
        anyhow::bail!(
            "CPU frequency limits not put back ({}); they are kept in {}: run `scx_esn restore-freq`",
            why.join("; "),
            record.display()
        )
    }
}

impl Drop for Dvfs {
    fn drop(&mut self) {
        if let Err(err) = self.restore() {
            warn!("--dvfs: {err:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpufreq::tests::{fake_cpu, limit_of};

    const MHZ: u64 = 1000;

    struct Tree {
        tmp: tempfile::TempDir,
    }

    impl Tree {
        /// Node 0: CPUs 0-1, no device. Node 1: CPUs 2-3, nvme0n1. Every CPU
        /// 800-3000 MHz, limit at the maximum, no frequency table.
        fn new() -> Tree {
            let tmp = tempfile::tempdir().unwrap();
            for cpu in 0..4 {
                fake_cpu(tmp.path(), cpu, 800 * MHZ, 3000 * MHZ, 3000 * MHZ, None);
            }
            let tree = Tree { tmp };
            tree.set_ticks("nvme0n1", 0);
            tree
        }
        fn root(&self) -> &Path {
            self.tmp.path()
        }
        fn set_ticks(&self, dev: &str, ms: u64) {
            let dir = self.root().join("block").join(dev);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("stat"),
                format!("1 0 8 5 0 0 0 0 0 {ms} 5 0 0 0 0 0 0\n"),
            )
            .unwrap();
        }
        fn record(&self) -> PathBuf {
            self.root().join("var/cpufreq-restore.json")
        }
        fn config(&self) -> DvfsConfig {
            DvfsConfig {
                interval: Duration::from_millis(100),
                util_threshold: 0.99,
                step_khz: 100 * MHZ,
                record: self.record(),
            }
        }
        fn nodes(&self) -> Vec<NodeInput> {
            vec![
                NodeInput {
                    node: 0,
                    cpus: vec![0, 1],
                    devices: vec![],
                },
                NodeInput {
                    node: 1,
                    cpus: vec![2, 3],
                    devices: vec!["nvme0n1".into()],
                },
            ]
        }
        /// Started, sampled at t0, and 100 ms later with the device busy all
        /// of it: node 1 one step down.
        fn one_busy_interval(&self) -> (Dvfs, Instant) {
            let mut dvfs = self.start();
            let t0 = Instant::now();
            dvfs.tick(t0).unwrap();
            self.set_ticks("nvme0n1", 100);
            dvfs.tick(t0 + Duration::from_millis(100)).unwrap();
            (dvfs, t0)
        }
        fn start(&self) -> Dvfs {
            match Dvfs::start(self.root(), &self.nodes(), self.config()).unwrap() {
                Start::On(d) => d,
                Start::Off(why) => panic!("off: {why}"),
            }
        }
    }

    #[test]
    fn saturated_device_steps_its_node_down_and_idle_device_restores() {
        let tree = Tree::new();
        let mut dvfs = tree.start();
        assert_eq!(dvfs.nodes(), vec![1]);
        let t0 = Instant::now();
        dvfs.tick(t0).unwrap();
        // 100 ms later the device was busy all of it: one step down.
        tree.set_ticks("nvme0n1", 100);
        dvfs.tick(t0 + Duration::from_millis(100)).unwrap();
        assert_eq!(limit_of(tree.root(), 2), 2900 * MHZ);
        assert_eq!(limit_of(tree.root(), 3), 2900 * MHZ);
        assert_eq!(limit_of(tree.root(), 0), 3000 * MHZ, "node 0 has no device");
        assert!(
            tree.record().exists(),
            "record written before the first change"
        );
        // Too early for another sample: nothing changes.
        tree.set_ticks("nvme0n1", 150);
        dvfs.tick(t0 + Duration::from_millis(150)).unwrap();
        assert_eq!(limit_of(tree.root(), 2), 2900 * MHZ);
        // Still saturated: a second step.
        tree.set_ticks("nvme0n1", 200);
        dvfs.tick(t0 + Duration::from_millis(200)).unwrap();
        assert_eq!(limit_of(tree.root(), 2), 2800 * MHZ);
        assert_eq!(dvfs.steps_down(), 2);
        assert_eq!(dvfs.limits(), vec![(1, 2800 * MHZ, 3000 * MHZ)]);
        // 50 % busy: straight back to the original limit.
        tree.set_ticks("nvme0n1", 250);
        dvfs.tick(t0 + Duration::from_millis(300)).unwrap();
        assert_eq!(limit_of(tree.root(), 2), 3000 * MHZ);
        assert_eq!(limit_of(tree.root(), 3), 3000 * MHZ);
    }

    #[test]
    fn exit_puts_lowered_limits_back_and_removes_the_record() {
        let tree = Tree::new();
        // The operator had capped CPU 3 below the maximum: that is what comes back.
        std::fs::write(
            cpufreq::cpufreq_dir(tree.root(), 3).join("scaling_max_freq"),
            "2000000\n",
        )
        .unwrap();
        let (dvfs, _) = tree.one_busy_interval();
        assert_eq!(limit_of(tree.root(), 3), 1900 * MHZ);
        drop(dvfs);
        assert_eq!(limit_of(tree.root(), 2), 3000 * MHZ);
        assert_eq!(limit_of(tree.root(), 3), 2000 * MHZ);
        assert!(!tree.record().exists());
    }

    #[test]
    fn steps_stop_at_the_minimum() {
        let tree = Tree::new();
        let mut dvfs = tree.start();
        let t0 = Instant::now();
        dvfs.tick(t0).unwrap();
        for i in 1..=40u64 {
            tree.set_ticks("nvme0n1", i * 100);
            dvfs.tick(t0 + Duration::from_millis(i * 100)).unwrap();
        }
        assert_eq!(limit_of(tree.root(), 2), 800 * MHZ);
        assert_eq!(dvfs.steps_down(), 22, "3000 to 800 MHz in 100 MHz steps");
    }

    #[test]
    fn a_record_left_by_a_killed_run_is_restored_at_start() {
        let tree = Tree::new();
        let (dvfs, _) = tree.one_busy_interval();
        // SIGKILL: no destructor runs.
        std::mem::forget(dvfs);
        assert_eq!(limit_of(tree.root(), 2), 2900 * MHZ);
        assert!(tree.record().exists());
        // The next start puts the true originals back before reading limits.
        let dvfs = tree.start();
        assert_eq!(limit_of(tree.root(), 2), 3000 * MHZ);
        assert_eq!(dvfs.limits(), vec![(1, 3000 * MHZ, 3000 * MHZ)]);
        assert!(!tree.record().exists());
    }

    #[test]
    fn no_cpufreq_is_off_with_a_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let nodes = vec![NodeInput {
            node: 0,
            cpus: vec![0, 1],
            devices: vec!["vda".into()],
        }];
        let config = DvfsConfig {
            interval: Duration::from_millis(100),
            util_threshold: 0.99,
            step_khz: 100 * MHZ,
            record: tmp.path().join("r.json"),
        };
        match Dvfs::start(tmp.path(), &nodes, config).unwrap() {
            Start::Off(why) => assert!(why.contains("no CPU has cpufreq"), "{why}"),
            Start::On(_) => panic!("on without cpufreq"),
        }
    }

    #[test]
    fn no_node_with_both_devices_and_cpufreq_is_off() {
        let tree = Tree::new();
        let nodes = vec![NodeInput {
            node: 0,
            cpus: vec![0, 1],
            devices: vec![],
        }];
        match Dvfs::start(tree.root(), &nodes, tree.config()).unwrap() {
            Start::Off(why) => assert!(why.contains("nothing to slow"), "{why}"),
            Start::On(_) => panic!("on without a device"),
        }
    }

    #[test]
    fn a_device_whose_stat_vanishes_is_skipped() {
        let tree = Tree::new();
        let mut dvfs = tree.start();
        let t0 = Instant::now();
        dvfs.tick(t0).unwrap();
        std::fs::remove_dir_all(tree.root().join("block/nvme0n1")).unwrap();
        dvfs.tick(t0 + Duration::from_millis(100)).unwrap();
        assert_eq!(limit_of(tree.root(), 2), 3000 * MHZ);
    }

    #[test]
    fn a_limit_that_cannot_be_written_stops_dvfs_and_puts_the_rest_back() {
        let tree = Tree::new();
        let (mut dvfs, t0) = tree.one_busy_interval();
        // CPU 3's limit file becomes unwritable (root ignores modes, so a
        // directory stands in for it).
        let file = cpufreq::cpufreq_dir(tree.root(), 3).join("scaling_max_freq");
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        tree.set_ticks("nvme0n1", 200);
        let err = format!(
            "{:#}",
            dvfs.tick(t0 + Duration::from_millis(200)).unwrap_err()
        );
        assert!(
            err.contains("cannot be set") && err.contains("cpu3"),
            "{err}"
        );
        assert_eq!(limit_of(tree.root(), 2), 3000 * MHZ, "CPU 2 put back");
        // CPU 3 could not be: it stays in the record for restore-freq.
        let left = Record::read(&tree.record()).unwrap().unwrap();
        assert_eq!(
            left.limits,
            vec![SavedLimit {
                cpu: 3,
                khz: 3000 * MHZ
            }]
        );
        // Later ticks do nothing.
        dvfs.tick(t0 + Duration::from_millis(300)).unwrap();
        assert_eq!(limit_of(tree.root(), 2), 3000 * MHZ);
    }

    #[test]
    fn permission_errors_are_told_apart() {
        let denied =
            anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
                .context("writing");
        assert!(cpufreq::is_permission_error(&denied));
        let erofs = anyhow::Error::from(std::io::Error::from_raw_os_error(libc::EROFS));
        assert!(cpufreq::is_permission_error(&erofs));
        let other = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(!cpufreq::is_permission_error(&other));
    }
}
