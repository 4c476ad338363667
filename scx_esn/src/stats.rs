// SPDX-License-Identifier: GPL-2.0-only
//! Interval statistics of a running scheduler: printed by `--stats`, served on
//! the scx_stats socket, read back by `--monitor`.
//!
//! ```text
//!  run loop (owns the BPF maps) ── Cumulative (counters, waits, I/O tables,
//!        │                          placed, thresholds, control decisions)
//!        ├─► --stats: interval(last, now) ─► text or JSON
//!        └─► stats server thread (scx_stats, /var/run/scx/root/stats):
//!              each connection keeps its own previous Cumulative, so any number
//!              of `scx_esn --monitor` clients get their own intervals
//! ```
//!
//! Only cumulative readings cross the channel; every interval is a difference
//! of two of them, made by whoever asked, so no reader disturbs another.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use crossbeam::channel::{Receiver, Sender};
use esn_controller::Decision;
use esn_stats::devt::DeviceTable;
use esn_stats::report::{build_report, render_text, ReportKind, ReportOptions};
use esn_stats::schema;
use esn_stats::snapshot::RawSnapshot;
use log::warn;
use scx_stats::prelude::{
    StatsData, StatsField, StatsFieldAttrs, StatsKind, StatsMeta, StatsOps, StatsServer,
    StatsServerData, StatsStructAttrs,
};

use crate::control;
use crate::counters::{self, Counters, NodeLoad, NodeSched};
use esn_power::cpustat::NodeTicks;
use esn_stats::live::Health;
use esn_stats::LatHist;

/// Everything the scheduler has counted since it started, at one moment.
#[derive(Clone, Debug, Default)]
pub struct Cumulative {
    pub counters: Counters,
    /// Waits, spills and steals, indexed by node.
    pub sched: Vec<NodeSched>,
    /// CPU ticks since boot, indexed by node.
    pub cpu: Vec<NodeTicks>,
    /// The CPUs' energy since the scheduler started.
    pub energy: Option<esn_power::energy::Reading>,
    pub watchdog_timeout_ms: u64,
    pub io: RawSnapshot,
    /// Gauges at that moment, one per node with CPUs.
    pub nodes: Vec<NodeGauge>,
    /// The controller's last decisions (empty with --threshold).
    pub decisions: Vec<Decision>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeGauge {
    pub node: u32,
    pub cpus: u32,
    pub placed: u32,
    pub threshold: u32,
}

/// A reading and the one taken when the scheduler started, so that a new
/// reader's first interval covers the whole run instead of nothing.
#[derive(Clone, Debug)]
pub struct Reading {
    pub start: Arc<Cumulative>,
    pub now: Cumulative,
}

pub use esn_stats::live::IntervalStats;

/// What happened between two readings.
pub fn interval(before: &Cumulative, now: &Cumulative, devices: &DeviceTable) -> IntervalStats {
    let deltas = counters::delta(&now.counters, &before.counters);
    let empty = NodeSched::default();
    let mut all_waits = LatHist::default();
    let nodes = now
        .nodes
        .iter()
        .map(|g| {
            let idx = g.node as usize;
            let n = now.sched.get(idx).unwrap_or(&empty);
            let b = before.sched.get(idx).unwrap_or(&empty);
            let waits = n.wait_hist.delta(&b.wait_hist);
            for (sum, w) in all_waits.slots.iter_mut().zip(waits.slots) {
                *sum += w;
            }
            NodeLoad {
                node: g.node,
                placed: g.placed,
                threshold: g.threshold,
                waits: n.waits.delta(&b.waits),
                cpus: g.cpus,
                busy_pct: match (now.cpu.get(idx), before.cpu.get(idx)) {
                    (Some(n), Some(b)) => n.busy_pct_since(b),
                    _ => None,
                },
                spill_in: n.spill_in.saturating_sub(b.spill_in),
                spill_out: n.spill_out.saturating_sub(b.spill_out),
                stolen_from: n.stolen_from.saturating_sub(b.stolen_from),
            }
        })
        .collect();
    let counter = |name: &str| {
        counters::NAMES
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| deltas[i])
    };
    let health = Health {
        dispatched: [
            "io_direct",
            "io_queued",
            "io_stolen",
            "fair_direct",
            "fair_queued",
            "fair_stolen",
            "starved_run",
        ]
        .iter()
        .map(|n| counter(n))
        .sum(),
        fallbacks: counter("place_none"),
        max_wait_ns: counters::longest_wait_ns(&all_waits),
        watchdog_timeout_ms: now.watchdog_timeout_ms,
    };
    let io = build_report(
        &before.io,
        &now.io,
        devices,
        &ReportOptions {
            device_filter: Vec::new(),
            top_tasks: 5,
            kind: ReportKind::Interval,
        },
    );
    let energy = match (&before.energy, &now.energy) {
        (Some(b), Some(n)) => esn_power::energy::interval(b, n).map(|e| e.with_io(&io)),
        _ => None,
    };
    IntervalStats {
        counters: counters::NAMES
            .iter()
            .zip(deltas)
            .map(|(name, v)| (name.to_string(), v))
            .collect(),
        nodes,
        control: now.decisions.clone(),
        health,
        energy,
        io,
    }
}

/// The text form: the counters line, the block I/O tables, the control lines.
pub fn render(s: &IntervalStats) -> String {
    let mut values: Counters = [0; counters::NAMES.len()];
    for (slot, name) in values.iter_mut().zip(counters::NAMES) {
        *slot = s.counters.get(name).copied().unwrap_or(0);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", counters::format_line(&values, &s.nodes));
    for n in &s.nodes {
        let _ = writeln!(
            out,
            "node {}: {} CPUs busy {} | placed {}/{} | spills in {} out {} | stolen {}",
            n.node,
            n.cpus,
            n.busy_pct.map_or("-".to_string(), |b| format!("{b:.0}%")),
            n.placed,
            n.threshold,
            n.spill_in,
            n.spill_out,
            n.stolen_from
        );
    }
    let h = &s.health;
    let _ = writeln!(
        out,
        "health: {} dispatched, {} fallbacks, longest wait {} of the {} s watchdog ({} left)",
        h.dispatched,
        h.fallbacks,
        h.max_wait_ns.map_or("-".to_string(), fmt_wait_bound),
        h.watchdog_timeout_ms / 1000,
        h.watchdog_margin_pct()
            .map_or("-".to_string(), |m| format!("{m:.1}%"))
    );
    let class_ms = |name: &str| s.counters.get(name).copied().unwrap_or(0) as f64 / 1e6;
    let (rt, idle) = (class_ms("run_ns_ioprio_rt"), class_ms("run_ns_ioprio_idle"));
    // Only where a class other than best effort ran: the usual case says
    // nothing new.
    if rt > 0.0 || idle > 0.0 {
        let _ = writeln!(
            out,
            "I/O priority classes, CPU time: rt {rt:.1} ms, be {:.1} ms, idle {idle:.1} ms",
            class_ms("run_ns_ioprio_be")
        );
    }
    if let Some(e) = &s.energy {
        let _ = writeln!(out, "{}", e.line());
    }
    out.push_str(&render_text(&s.io));
    let thresholds: Vec<u32> = {
        let len = s
            .nodes
            .iter()
            .map(|n| n.node as usize + 1)
            .max()
            .unwrap_or(0);
        let mut t = vec![0; len];
        for n in &s.nodes {
            t[n.node as usize] = n.threshold;
        }
        t
    };
    out.push_str(&control::format_decisions(&s.control, &thresholds));
    out
}

/// A wait's upper bound in the unit that keeps it readable.
fn fmt_wait_bound(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("<= {} us", ns / 1000)
    } else {
        format!("<= {:.1} ms", ns as f64 / 1e6)
    }
}

/// Prints one interval as text or as one JSON line; a closed stdout is
/// `output::Closed`.
pub fn print(s: &IntervalStats, json: bool) -> Result<()> {
    if json {
        crate::output::write(&format!("{}\n", serde_json::to_string(s)?))
    } else {
        crate::output::write(&render(s))
    }
}

/// Binds the socket so that nobody but root can connect before its mode is
/// set: the umask covers the moment between bind and chmod. The directories
/// are made first under the usual umask, as other schedulers share them.
fn launch_restricted(
    server: StatsServer<(), Reading>,
    access: &SocketAccess,
) -> Result<StatsServer<(), Reading>> {
    let path = Path::new(SOCKET);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // SAFETY: umask cannot fail; it is put back right after the bind. Our
    // other threads (signals, /metrics) create no files meanwhile.
    let old = unsafe { libc::umask(0o077) };
    let launched = server.launch();
    unsafe { libc::umask(old) };
    let server = launched?;
    access.apply(path)?;
    Ok(server)
}

/// The server side: requests come in from the server's threads, readings go
/// back from the run loop.
pub struct Server {
    _server: StatsServer<(), Reading>,
    requests: Receiver<()>,
    replies: Sender<Reading>,
}

impl Server {
    /// Serves `target "top"` on the standard scx_stats socket. Each
    /// connection keeps its previous reading; `devices` names the disks.
    pub fn launch(devices: DeviceTable, access: &SocketAccess) -> Result<Server> {
        let open = move |_: (&Sender<()>, &Receiver<Reading>)| {
            let devices = devices.clone();
            let mut prev: Option<Cumulative> = None;
            // The channels are the server's, shared by its connections: a
            // request is answered by the next reading the run loop sends.
            let read = move |_args: &BTreeMap<String, String>,
                             (req, res): (&Sender<()>, &Receiver<Reading>)|
                  -> Result<serde_json::Value> {
                req.send(()).context("the scheduler's loop is gone")?;
                let reading = res
                    .recv_timeout(Duration::from_secs(5))
                    .context("no reading from the scheduler's loop within 5 s")?;
                let before = prev.as_ref().unwrap_or(&reading.start);
                let stats = interval(before, &reading.now, &devices);
                prev = Some(reading.now);
                Ok(serde_json::to_value(stats)?)
            };
            Ok(Box::new(read) as Box<dyn scx_stats::prelude::StatsReader<(), Reading>>)
        };
        let data = with_meta(StatsServerData::<(), Reading>::new()).add_ops(
            "top",
            StatsOps {
                open: Box::new(open),
                close: None,
            },
        );
        let server = launch_restricted(StatsServer::new(data), access)
            .with_context(|| format!("starting the stats server on {SOCKET}"))?;
        let (replies, requests) = server.channels();
        Ok(Server {
            _server: server,
            requests,
            replies,
        })
    }

    /// How many readers wait for a reading (call from the run loop).
    pub fn wanted(&self) -> usize {
        let mut n = 0;
        while self.requests.try_recv().is_ok() {
            n += 1;
        }
        n
    }

    pub fn reply(&self, reading: Reading) {
        // A reader that timed out is gone; nothing to do about it here.
        let _ = self.replies.send(reading);
    }
}

/// The description of every served struct (`esn_stats::schema`), in the
/// scx_stats form: answered to `stats_meta`, printed by `--help-stats`.
fn meta() -> Vec<StatsMeta> {
    fn kind(k: schema::Kind) -> StatsKind {
        match k {
            // scx_stats has no boolean; JSON true/false read as numbers do 1/0.
            schema::Kind::U64 | schema::Kind::Bool => StatsKind::U64,
            schema::Kind::I64 => StatsKind::I64,
            schema::Kind::Float => StatsKind::Float,
            schema::Kind::String => StatsKind::String,
            schema::Kind::Struct(name) => StatsKind::Struct(name.to_string()),
        }
    }
    schema::structs()
        .iter()
        .map(|s| StatsMeta {
            name: s.name.to_string(),
            attrs: StatsStructAttrs {
                top: (s.name == schema::TOP).then(|| "true".to_string()),
                desc: Some(s.desc.to_string()),
                user: BTreeMap::new(),
            },
            fields: s
                .fields
                .iter()
                .map(|f| {
                    let data = match f.shape {
                        schema::Shape::Datum(k) => StatsData::Datum(kind(k)),
                        schema::Shape::Array(k) => StatsData::Array(kind(k)),
                        schema::Shape::Dict { key, datum } => StatsData::Dict {
                            key: kind(key),
                            datum: kind(datum),
                        },
                    };
                    let desc = if f.nullable {
                        format!("{} (may be null)", f.desc)
                    } else {
                        f.desc.to_string()
                    };
                    let attrs = StatsFieldAttrs {
                        desc: Some(desc),
                        user: BTreeMap::new(),
                    };
                    (f.name.to_string(), StatsField { data, attrs })
                })
                .collect(),
        })
        .collect()
}

fn with_meta<Req: Send + 'static, Res: Send + 'static>(
    mut data: StatsServerData<Req, Res>,
) -> StatsServerData<Req, Res> {
    for m in meta() {
        data = data.add_meta(m);
    }
    data
}

/// `scx_esn --help-stats`: every field of an interval and what it means,
/// struct by struct from the top. (scx_stats' own describe_meta follows
/// only arrays and dicts of structs, so it would leave out `health` and
/// `io`.)
pub fn describe(out: &mut impl std::io::Write) -> Result<()> {
    let metas = meta();
    let name_width = metas.iter().map(|m| m.name.len()).max().unwrap_or(0);
    let field_width = metas
        .iter()
        .flat_map(|m| m.fields.keys().map(|k| k.len()))
        .max()
        .unwrap_or(0);
    let data_width = metas
        .iter()
        .flat_map(|m| m.fields.values().map(|f| f.data.to_string().len() + 2))
        .max()
        .unwrap_or(0);
    for (i, m) in metas.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let desc = m.attrs.desc.as_deref().unwrap_or("");
        writeln!(out, "[{:name_width$}] {desc}", m.name)?;
        for (name, field) in &m.fields {
            let data = format!("({})", field.data);
            let desc = field.attrs.desc.as_deref().unwrap_or("");
            writeln!(out, "  {name:field_width$} {data:data_width$} : {desc}")?;
        }
    }
    Ok(())
}

/// `scx_esn --monitor SECS`: print a running scheduler's intervals until
/// SIGINT/SIGTERM. Waits (and says so) while no scheduler serves stats.
pub fn monitor(every: Duration, json: bool, shutdown: Arc<AtomicBool>) -> Result<()> {
    check_socket_access(Path::new(SOCKET))?;
    scx_utils::monitor_stats::<IntervalStats>(
        &[],
        every,
        || shutdown.load(Ordering::Relaxed),
        |s| print(&s, json),
    )
    .map_err(|err| explain_denied(err, Path::new(SOCKET)))
}

/// Where scx_stats serves every sched_ext scheduler's statistics.
pub const SOCKET: &str = "/var/run/scx/root/stats";

/// Who may read the stats socket: root alone (mode 0600), or also the
/// members of one group (0660, `--stats-group`). What it serves names every
/// task doing I/O and its devices, which other users need not see.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketAccess {
    group: Option<libc::gid_t>,
}

impl SocketAccess {
    /// Root only, or also `group` (a name or a number), which must exist.
    pub fn for_group(group: Option<&str>) -> Result<SocketAccess> {
        let Some(name) = group else {
            return Ok(SocketAccess::default());
        };
        let gid = match name.parse::<libc::gid_t>() {
            Ok(gid) => gid,
            Err(_) => group_id(name)?.with_context(|| {
                format!("--stats-group {name}: no such group (see /etc/group, or give a number)")
            })?,
        };
        Ok(SocketAccess { group: Some(gid) })
    }

    pub fn mode(&self) -> u32 {
        if self.group.is_some() {
            0o660
        } else {
            0o600
        }
    }

    /// Gives the socket file just bound its owner group and mode.
    fn apply(&self, path: &Path) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        if let Some(gid) = self.group {
            std::os::unix::fs::chown(path, None, Some(gid))
                .with_context(|| format!("giving {} to group {gid}", path.display()))?;
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(self.mode()))
            .with_context(|| format!("setting the mode of {}", path.display()))
    }
}

/// The gid of a group name through the system's group database (NSS, not
/// only /etc/group).
fn group_id(name: &str) -> Result<Option<libc::gid_t>> {
    let cname = std::ffi::CString::new(name).context("a group name without NUL bytes")?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    loop {
        // SAFETY: every pointer is valid for the call: grp and result are
        // locals, buf is a live buffer of buf.len() bytes.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut grp,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        match rc {
            0 if result.is_null() => return Ok(None),
            0 => return Ok(Some(grp.gr_gid)),
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            err => {
                return Err(std::io::Error::from_raw_os_error(err))
                    .with_context(|| format!("looking up group {name}"))
            }
        }
    }
}

/// A reader that may not connect is told why at once instead of waiting for
/// a scheduler forever. A missing socket is fine: one may start later.
pub fn check_socket_access(path: &Path) -> Result<()> {
    match std::os::unix::net::UnixStream::connect(path) {
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(explain_denied(err.into(), path))
        }
        _ => Ok(()),
    }
}

fn explain_denied(err: anyhow::Error, path: &Path) -> anyhow::Error {
    let denied = err
        .chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
    if !denied {
        return err;
    }
    anyhow::anyhow!(
        "permission denied on {}: run as root (the stats socket is root's unless \
         scx_esn was started with --stats-group GROUP and you are in GROUP)",
        path.display()
    )
}

/// Launching the server may fail (no /var/run, a read-only root): the
/// scheduler runs on without it, and says so.
pub fn try_launch(devices: DeviceTable, access: &SocketAccess) -> Option<Server> {
    match Server::launch(devices, access) {
        Ok(s) => Some(s),
        Err(err) => {
            warn!("no stats server, `scx_esn --monitor` will not see this instance: {err:#}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::NodeWaits;
    use esn_stats::devt::{DevT, DeviceInfo};
    use esn_stats::live::EnergySource;
    use esn_stats::snapshot::{IoCounters, IoKey, Locality, Op};

    fn reading(placed: u32, reqs: u64, at_ns: u64) -> Cumulative {
        let mut c = Cumulative::default();
        c.counters[0] = reqs;
        let mut waits = LatHist::default();
        waits.slots[12] = reqs;
        c.sched = vec![
            NodeSched::default(),
            NodeSched {
                waits: NodeWaits {
                    io_waits: reqs,
                    io_wait_ns: reqs * 1000,
                    ..Default::default()
                },
                wait_hist: waits,
                spill_in: reqs / 10,
                ..Default::default()
            },
        ];
        c.cpu = vec![
            NodeTicks::default(),
            NodeTicks {
                busy: reqs,
                total: 4 * reqs,
                cpus: 2,
            },
        ];
        // Joules since start: node 0 1 J per request, node 1 2 J.
        c.energy = Some(esn_power::energy::Reading {
            source: EnergySource::Estimated,
            taken: epoch() + Duration::from_nanos(at_ns),
            joules: vec![(0, reqs as f64), (1, 2.0 * reqs as f64)],
        });
        c.watchdog_timeout_ms = 30_000;
        c.nodes = vec![
            NodeGauge {
                node: 0,
                cpus: 2,
                placed: 0,
                threshold: 2,
            },
            NodeGauge {
                node: 1,
                cpus: 2,
                placed,
                threshold: 1,
            },
        ];
        let mut device = LatHist::default();
        for _ in 0..reqs {
            device.record(100_000);
        }
        c.io.at_ns = at_ns;
        c.io.io.insert(
            IoKey {
                dev: DevT::new(259, 0),
                locality: Locality::Local,
                op: Op::Read,
            },
            IoCounters {
                reqs,
                bytes: reqs * 4096,
                device,
                ..Default::default()
            },
        );
        c
    }

    /// One Instant for every reading of a test, so their spacing is exact.
    fn epoch() -> std::time::Instant {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        *EPOCH.get_or_init(std::time::Instant::now)
    }

    fn devices() -> DeviceTable {
        DeviceTable::new(vec![DeviceInfo {
            name: "nvme0n1".into(),
            dev: DevT::new(259, 0),
            node: Some(1),
            partitions: vec![],
        }])
    }

    #[test]
    fn an_interval_is_the_difference_of_two_readings() {
        let a = reading(1, 100, 1_000_000_000);
        let b = reading(1, 1100, 2_000_000_000);
        let s = interval(&a, &b, &devices());
        assert_eq!(s.counters[counters::NAMES[0]], 1000);
        assert_eq!(s.nodes[1].waits.io_waits, 1000);
        assert_eq!(s.nodes[1].spill_in, 100);
        assert_eq!(s.nodes[1].busy_pct, Some(25.0));
        assert_eq!(s.nodes[0].busy_pct, None);
        assert_eq!(s.health.max_wait_ns, Some(8192));
        assert_eq!(s.health.watchdog_timeout_ms, 30_000);
        assert!(s.health.watchdog_margin_pct().unwrap() > 99.9);
        assert_eq!(s.nodes[1].threshold, 1);
        let text = render(&s);
        assert!(text.contains("n1=1/1 wait io=1us"), "{text}");
        assert!(
            text.contains("node 1: 2 CPUs busy 25% | placed 1/1 | spills in 100 out 0 | stolen 0"),
            "{text}"
        );
        assert!(
            text.contains("health: 0 dispatched, 0 fallbacks, longest wait <= 8 us of the 30 s watchdog (100.0% left)"),
            "{text}"
        );
        assert!(text.contains("nvme0n1"), "{text}");
        // 3000 J in 1 s over 1000 requests of 100 us: 3 J per I/O, and
        // 1000 IOPS / (0.1 ms x 3000 mJ) = 3.333.
        let e = s.energy.as_ref().unwrap();
        assert_eq!(e.joules, 3000.0);
        assert_eq!(e.joules_per_io, Some(3.0));
        assert!(
            text.contains(
                "energy (estimated): node 0 1000.0 W, node 1 2000.0 W; total 3000.0 W \
                 (3000.0 J), 3000.00 mJ per I/O, trade-off 3.333"
            ),
            "{text}"
        );
        // The JSON form reads back as it was written (what --monitor gets).
        let back: IntervalStats =
            serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn an_empty_first_reading_is_no_panic() {
        let s = interval(&Cumulative::default(), &reading(0, 0, 5), &devices());
        assert!(s.counters.values().all(|&v| v == 0));
        let _ = render(&s);
    }

    #[test]
    fn help_stats_describes_every_struct_from_the_top() {
        let mut out = Vec::new();
        describe(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for s in schema::structs() {
            assert!(
                text.contains(&format!("[{}", s.name)),
                "{} missing:\n{text}",
                s.name
            );
        }
        assert!(text.starts_with("[IntervalStats"), "{text}");
        assert!(text.contains("exploring"), "{text}");
        assert!(text.contains("(may be null)"), "{text}");
        // The top is set, so a client asking stats_meta knows where to start.
        let top: Vec<_> = meta()
            .into_iter()
            .filter(|m| m.attrs.top.is_some())
            .collect();
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].name, schema::TOP);
    }
}
