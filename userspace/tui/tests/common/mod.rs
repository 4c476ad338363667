//! Fixtures: realistic intervals built by hand, and a terminal that renders an
//! app into lines of text.
#![allow(dead_code)] // Each test file uses its own subset.

use std::collections::BTreeMap;
use std::time::Duration;

use esn_controller::NodeWaits;
use esn_controller::{Decision, PenaltySource};
use esn_reading::{Health, IntervalStats, NodeLoad};
use esn_stats::{
    CostReport, DeviceReport, EnergySource, EnergyStats, LatKind, LatencyReport, Locality,
    NodeEnergy, NodeReport, Op, Report, ReportKind, TaskReport, TrackingReport,
};
use esn_topology::devt::DevT;
use esn_tui::{App, Mode};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use serde_json::json;

pub fn lat(locality: Locality, op: Op, kind: LatKind, p50: f64, p99: f64) -> LatencyReport {
    LatencyReport {
        locality,
        op,
        kind,
        count: 1000,
        mean_us: Some(p50 * 1.1),
        p50_us: Some(p50),
        p99_us: Some(p99),
    }
}

/// Built from JSON like the other report rows, so that fields added later
/// with `#[serde(default)]` keep their default here.
pub fn device(name: &str, minor: u32, node: Option<u32>, iops: f64, mb_s: f64) -> DeviceReport {
    let reqs = iops as u64;
    let remote = reqs / 10;
    let mut d: DeviceReport = serde_json::from_value(json!({
        "name": name,
        "dev": DevT::new(259, minor),
        "node": node,
        "reqs": reqs,
        "bytes": (mb_s * 1e6) as u64,
        "iops": iops,
        "mb_s": mb_s,
        "reqs_by_op": { "read": reqs },
        "local_reqs": reqs - remote,
        "remote_reqs": remote,
        "unknown_reqs": 0,
        "remote_share": remote as f64 / reqs.max(1) as f64,
        "cross_completions": remote / 2,
        "latency": [],
    }))
    .expect("device fixture");
    d.latency = vec![
        lat(Locality::Local, Op::Read, LatKind::Queue, 3.0, 9.0),
        lat(Locality::Local, Op::Read, LatKind::Device, 78.0, 412.0),
        lat(Locality::Remote, Op::Read, LatKind::Device, 96.0, 655.0),
    ];
    d
}

#[allow(clippy::too_many_arguments)]
pub fn task(
    tgid: u32,
    tid: u32,
    comm: &str,
    iops: f64,
    mb_s: f64,
    remote_reqs: u64,
    dev: Option<&str>,
    last_node: Option<u32>,
) -> TaskReport {
    serde_json::from_value(json!({
        "tid": tid,
        "tgid": tgid,
        "comm": comm,
        "reqs": iops as u64,
        "bytes": (mb_s * 1e6) as u64,
        "iops": iops,
        "mb_s": mb_s,
        "remote_reqs": remote_reqs,
        "dominant_dev": dev,
        "last_node": last_node,
        "io_score": 900,
    }))
    .expect("task fixture")
}

pub fn node_load(node: u32, placed: u32, threshold: u32, busy: Option<f64>) -> NodeLoad {
    NodeLoad {
        node,
        placed,
        threshold,
        waits: NodeWaits {
            io_waits: 1000,
            io_wait_ns: 12_500_000,
            fair_waits: 400,
            fair_wait_ns: 8_000_000,
            ..Default::default()
        },
        cpus: 16,
        busy_pct: busy,
        spill_in: u64::from(node) * 7,
        spill_out: 11,
        stolen_from: 5,
    }
}

pub fn node_io(node: u32, reqs: u64, remote_reqs: u64) -> NodeReport {
    NodeReport {
        node,
        reqs,
        bytes: reqs * 4096,
        remote_reqs,
        remote_share: (reqs > 0).then(|| remote_reqs as f64 / reqs as f64),
        completions: reqs,
        cross_completions: remote_reqs / 2,
    }
}

pub fn decision(node: u32, threshold: u32, p_numa: f64, p_cont: Option<f64>) -> Decision {
    Decision {
        node,
        threshold,
        p_numa,
        p_numa_source: PenaltySource::Measured,
        spill_contention: 0.0,
        curve: Some([0.01, 0.02, 1.0]),
        n_star: Some(threshold),
        exploring: false,
        placed: threshold,
        p_cont,
        iops: None,
        climb: None,
    }
}

pub fn report(
    devices: Vec<DeviceReport>,
    nodes: Vec<NodeReport>,
    tasks: Vec<TaskReport>,
) -> Report {
    Report {
        kind: ReportKind::Interval,
        elapsed_s: 1.0,
        devices,
        nodes,
        tasks,
        bpf: CostReport {
            run_time_ns: 0,
            run_cnt: 0,
            ns_per_event: None,
            cpu_pct: None,
        },
        tracking: TrackingReport {
            started: 100,
            completed: 100,
            untracked: 0,
            inflight_full: 0,
            aged_out: 0,
        },
        energy: None,
    }
}

/// Two nodes, one NVMe device each, three tasks: a fio job on node 0's
/// device, a postgres backend running remote from its device, and a kworker.
pub fn two_nodes() -> IntervalStats {
    IntervalStats {
        counters: BTreeMap::from([
            ("place_local".to_string(), 1500),
            ("io_stolen".to_string(), 5),
        ]),
        nodes: vec![
            node_load(0, 2, 2, Some(48.0)),
            node_load(1, 1, 3, Some(12.5)),
        ],
        control: vec![decision(0, 2, 1.42, Some(1.17)), decision(1, 3, 1.38, None)],
        health: Health {
            dispatched: 123_456,
            fallbacks: 3,
            max_wait_ns: Some(2_097_152),
            watchdog_timeout_ms: 30_000,
        },
        energy: Some(EnergyStats {
            source: EnergySource::Estimated,
            nodes: vec![
                NodeEnergy {
                    node: 0,
                    joules: 71.0,
                    watts: 71.0,
                },
                NodeEnergy {
                    node: 1,
                    joules: 20.5,
                    watts: 20.5,
                },
            ],
            joules: 91.5,
            watts: 91.5,
            joules_per_io: Some(0.00172),
            tradeoff: Some(2.4),
        }),
        io: report(
            vec![
                device("nvme0n1", 0, Some(0), 45_210.0, 185.2),
                device("nvme1n1", 1, Some(1), 8_000.0, 32.8),
            ],
            vec![node_io(0, 40_000, 4_000), node_io(1, 13_210, 5_000)],
            vec![
                task(
                    4242,
                    4243,
                    "fio",
                    30_000.0,
                    122.9,
                    300,
                    Some("nvme0n1"),
                    Some(0),
                ),
                task(
                    1201,
                    1250,
                    "postgres",
                    5_000.0,
                    409.6,
                    4_000,
                    Some("nvme1n1"),
                    Some(0),
                ),
                task(77, 77, "kworker/u64:2", 900.0, 3.7, 450, None, Some(1)),
            ],
        ),
    }
}

/// `n` nodes with CPUs, one device on node 0.
pub fn many_nodes(n: u32) -> IntervalStats {
    let mut s = two_nodes();
    s.nodes = (0..n)
        .map(|i| node_load(i, i, i + 2, Some(f64::from(i) * 10.0)))
        .collect();
    s.control = (0..n).map(|i| decision(i, i + 2, 1.3, Some(1.1))).collect();
    s.io.nodes = (0..n)
        .map(|i| node_io(i, 1000 * u64::from(i + 1), 10))
        .collect();
    s.io.devices.truncate(1);
    if let Some(e) = s.energy.as_mut() {
        e.nodes = (0..n)
            .map(|i| NodeEnergy {
                node: i,
                joules: 20.0 + f64::from(i),
                watts: 20.0 + f64::from(i),
            })
            .collect();
    }
    s
}

/// What an observe-only source delivers: block I/O, nothing from a scheduler.
pub fn observe_only() -> IntervalStats {
    let mut s = two_nodes();
    s.counters.clear();
    s.nodes.clear();
    s.control.clear();
    s.health = Health::default();
    s.energy = None;
    s
}

pub fn app_with(stats: IntervalStats) -> App {
    let mut app = App::new(Mode::Scheduler, Duration::from_secs(1));
    app.push(stats);
    app
}

/// The app drawn on a `w`x`h` test terminal, one string per line.
pub fn render(app: &App, w: u16, h: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal
        .draw(|frame| esn_tui::draw(frame, app))
        .expect("draw");
    let buf = terminal.backend().buffer();
    let width = usize::from(buf.area.width);
    if width == 0 {
        return Vec::new();
    }
    buf.content()
        .chunks(width)
        .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
        .collect()
}

pub fn screen(lines: &[String]) -> String {
    lines.join("\n")
}

/// The line that contains `needle`, for asserting on a row.
pub fn line_with<'a>(lines: &'a [String], needle: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line contains {needle:?} in\n{}", screen(lines)))
}

pub fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

pub fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}
