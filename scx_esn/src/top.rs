// SPDX-License-Identifier: GPL-2.0-only
//! `scx_esn top`: the live terminal view (crate `esn_tui`) fed from one of
//! two sources.
//!
//! ```text
//!  scheduler mode: StatsClient ─► /var/run/scx/root/stats ("top") ─► IntervalStats
//!                  (each request is one interval since the previous one;
//!                   a lost connection shows "disconnected" and is retried)
//!  observe mode:   observer BPF (blk-mq only, no sched_ext) ─► RawSnapshot
//!                  + energy meter ─► Reading
//!                  ─► build_report(prev, now) ─► IntervalStats { io, energy,
//!                                                              rest empty }
//! ```
//!
//! Without `--observe`, top uses the socket when one exists; when none does
//! and it may load BPF (root), it observes block I/O itself and says so; as a
//! plain user it waits for a scheduler to appear.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use esn_power::energy::{Meter, Reading};
use esn_reading::IntervalStats;
use esn_stats::report::{ReportKind, ReportOptions};
use esn_stats::snapshot::RawSnapshot;
use esn_topology::devt::DeviceTable;
use esn_topology::Topology;
use esn_tui::{Mode, Source};
use scx_stats::prelude::StatsClient;

use crate::blkobs::HookPrefs;
use crate::cli::{positive_secs, TopOpts};
use crate::observe::{self, ObserverSetup};
use esn_topology::plan::Plan;

/// Tasks listed per interval; the TUI sorts and trims them itself.
const TOP_TASKS: usize = 20;

/// Intervals read from a running scheduler's stats socket.
pub struct SocketSource {
    path: std::path::PathBuf,
    client: Option<StatsClient>,
}

impl SocketSource {
    pub fn new(path: &Path) -> SocketSource {
        SocketSource {
            path: path.to_path_buf(),
            client: None,
        }
    }
}

impl Source for SocketSource {
    fn fetch(&mut self) -> Result<IntervalStats> {
        if self.client.is_none() {
            let client = StatsClient::new()
                .set_path(&self.path)
                .connect(Some(5000))
                .map_err(|err| {
                    anyhow!(
                        "no scx_esn at {}: {err} (start one, or run `scx_esn top \
                         --observe` as root for block I/O alone)",
                        self.path.display()
                    )
                })?;
            self.client = Some(client);
        }
        let client = self.client.as_mut().expect("connected above");
        match client.request::<IntervalStats>("stats", vec![]) {
            Ok(stats) => Ok(stats),
            Err(err) => {
                // A scheduler that exited leaves a dead connection: a new one
                // is made at the next refresh.
                self.client = None;
                Err(err.context("reading the stats socket"))
            }
        }
    }

    fn mode(&self) -> Mode {
        Mode::Scheduler
    }
}

/// Intervals computed from the observer's snapshots and the energy meter
/// (no scheduler). Refreshes are at most 10 s apart, well inside the RAPL
/// counters' wrap.
pub struct ObserveSource<'r> {
    read: &'r mut dyn FnMut() -> Result<RawSnapshot>,
    meter: Meter,
    devices: DeviceTable,
    prev: (RawSnapshot, Reading),
}

impl<'r> ObserveSource<'r> {
    pub fn new(
        read: &'r mut dyn FnMut() -> Result<RawSnapshot>,
        meter: Meter,
        devices: DeviceTable,
    ) -> Result<ObserveSource<'r>> {
        let prev = (read()?, meter.read());
        Ok(ObserveSource {
            read,
            meter,
            devices,
            prev,
        })
    }
}

/// An interval of block I/O and CPU energy alone, in the scheduler's
/// interval shape.
pub fn observe_interval(
    prev: &(RawSnapshot, Reading),
    now: &(RawSnapshot, Reading),
    devices: &DeviceTable,
) -> IntervalStats {
    let opts = ReportOptions {
        device_filter: Vec::new(),
        top_tasks: TOP_TASKS,
        kind: ReportKind::Interval,
    };
    let mut io = observe::report_between(prev, now, devices, &opts);
    IntervalStats {
        counters: Default::default(),
        nodes: Vec::new(),
        control: Vec::new(),
        health: Default::default(),
        // Where the scheduler's intervals have it.
        energy: io.energy.take(),
        io,
    }
}

impl Source for ObserveSource<'_> {
    fn fetch(&mut self) -> Result<IntervalStats> {
        let now = ((self.read)()?, self.meter.read());
        let stats = observe_interval(&self.prev, &now, &self.devices);
        self.prev = now;
        Ok(stats)
    }

    fn mode(&self) -> Mode {
        Mode::Observe
    }
}

/// Observe mode when asked for, or when no scheduler serves stats and this
/// process may load BPF itself.
fn wants_observe(opts: &TopOpts, socket: &Path) -> bool {
    opts.observe || (!socket.exists() && nix_is_root())
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn run(
    topo: &Topology,
    opts: &TopOpts,
    sysfs: &Path,
    io_half_life_ms: u64,
    verbose: u8,
    shutdown: &AtomicBool,
) -> Result<()> {
    let refresh = positive_secs("--interval", opts.interval)?;
    let refresh = refresh.clamp(Duration::from_millis(250), Duration::from_secs(10));
    let should_quit = || shutdown.load(Ordering::Relaxed);
    let socket = opts
        .socket
        .as_deref()
        .unwrap_or(Path::new(crate::socket::SOCKET));
    let observe = wants_observe(opts, socket);
    if !observe {
        crate::socket::check_socket_access(socket)?;
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        anyhow::bail!(
            "scx_esn top needs a terminal on stdout; for a log use `scx_esn --monitor \
             SECS` (or `scx_esn observe`)"
        );
    }
    if !observe {
        let mut source = SocketSource::new(socket);
        return esn_tui::run(&mut source, refresh, &should_quit);
    }
    let setup = ObserverSetup {
        io_half_life_ms,
        verbose,
        hooks: HookPrefs::default(),
    };
    // libbpf and our own log lines would scribble over the screen.
    log::set_max_level(log::LevelFilter::Error);
    // The scheduler's CPU -> node map and locality rule; thresholds do not matter.
    let plan = Plan::new(topo, None)?;
    let devices = plan.device_table(topo);
    let meter = crate::sched::energy_meter(sysfs, &opts.energy, &plan);
    observe::with_observer(topo, &plan, &devices, &setup, |read| {
        let mut source = ObserveSource::new(read, meter, devices.clone())
            .context("the first read of the observer's maps")?;
        esn_tui::run(&mut source, refresh, &should_quit)
    })
    .context("observe mode (no scx_esn running): loading the block I/O observer")
}

#[cfg(test)]
mod tests {
    use super::*;
    use esn_stats::snapshot::{IoCounters, IoKey, Locality, Op};
    use esn_topology::devt::{DevT, DeviceInfo};

    #[test]
    fn an_observe_interval_has_io_and_energy_and_nothing_else() {
        let devices = DeviceTable::new(vec![DeviceInfo {
            name: "nvme0n1".into(),
            dev: DevT::new(259, 0),
            node: Some(1),
            partitions: vec![],
        }]);
        let prev = RawSnapshot {
            at_ns: 1_000_000_000,
            ..Default::default()
        };
        let mut now = prev.clone();
        now.at_ns = 2_000_000_000;
        now.io.insert(
            IoKey {
                dev: DevT::new(259, 0),
                locality: Locality::Local,
                op: Op::Read,
            },
            IoCounters {
                reqs: 500,
                bytes: 500 * 4096,
                ..Default::default()
            },
        );
        let taken = std::time::Instant::now();
        let reading = |secs: u64, joules: Vec<(u32, f64)>| Reading {
            source: esn_stats::energy::EnergySource::Estimated,
            taken: taken + Duration::from_secs(secs),
            joules,
        };
        let s = observe_interval(
            &(prev, reading(0, vec![(0, 10.0), (1, 20.0)])),
            &(now, reading(2, vec![(0, 110.0), (1, 70.0)])),
            &devices,
        );
        assert!(s.nodes.is_empty() && s.counters.is_empty() && s.control.is_empty());
        assert_eq!(s.io.devices[0].name, "nvme0n1");
        assert_eq!(s.io.devices[0].iops, Some(500.0));
        // The energy is the interval's, where the scheduler's is, once.
        let e = s.energy.expect("two readings of one source");
        assert_eq!((e.joules, e.watts), (150.0, 75.0));
        assert_eq!(e.nodes[1].watts, 25.0);
        assert_eq!(e.joules_per_io, Some(150.0 / 500.0));
        assert!(s.io.energy.is_none());
    }

    #[test]
    fn a_missing_socket_says_what_to_do() {
        let mut source = SocketSource::new(Path::new("/nonexistent/scx/stats"));
        let err = source.fetch().unwrap_err().to_string();
        assert!(err.contains("/nonexistent/scx/stats"), "{err}");
        assert!(err.contains("--observe"), "{err}");
        assert_eq!(source.mode(), Mode::Scheduler);
    }
}
