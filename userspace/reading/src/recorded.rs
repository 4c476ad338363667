// SPDX-License-Identifier: GPL-2.0-only
//! The three outputs of one recorded pair of readings, byte for byte: the
//! `--stats` text, the interval's JSON (`--stats --json`, the socket,
//! `--monitor --json`; `--monitor`'s text is rendered from it) and
//! `/metrics`. A change that moves code around must leave them as they are;
//! one that means to change an output re-records them with ESN_BLESS=1 and
//! shows the difference in its diff.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::IntervalStats;
use esn_controller::NodeWaits;
use esn_controller::{Decision, PenaltySource};
use esn_power::cpustat::NodeTicks;
use esn_stats::snapshot::{IoCounters, IoKey, Locality, NodeIo, Op, TaskIo};
use esn_stats::LatHist;
use esn_topology::devt::{DevT, DeviceTable};

use crate::fixtures;
use crate::{interval, metrics, render, Cumulative, NodeSched};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");

fn devices() -> DeviceTable {
    fixtures::devices(true)
}

/// Everything counted after `secs` seconds of a steady load: every
/// counter, both nodes, both latency kinds, local and remote, a task,
/// energy and a controller decision.
fn recorded(secs: u64) -> Cumulative {
    let mut c = Cumulative::default();
    for (i, slot) in c.counters.iter_mut().enumerate() {
        *slot = secs * (i as u64 + 1) * 37;
    }
    c.sched = (0..2u64)
        .map(|n| {
            let mut wait_hist = LatHist::default();
            wait_hist.slots[10 + n as usize] = secs * 50;
            wait_hist.slots[17] = secs * (n + 1);
            NodeSched {
                waits: NodeWaits {
                    io_waits: secs * 40 * n,
                    io_wait_ns: secs * 40 * n * 15_000,
                    fair_waits: secs * 90,
                    fair_wait_ns: secs * 90 * 4_000,
                    io_idle_waits: secs * 30 * n,
                    io_idle_wait_ns: secs * 30 * n * 10_000,
                },
                wait_hist,
                spill_in: secs * n,
                spill_out: secs * (1 - n),
                stolen_from: secs * 2,
            }
        })
        .collect();
    c.cpu = (0..2u64)
        .map(|n| NodeTicks {
            busy: secs * (60 + 70 * n),
            total: secs * 200,
            cpus: 2,
        })
        .collect();
    c.energy = Some(fixtures::energy(
        Duration::from_secs(secs),
        [secs as f64 * 41.5, secs as f64 * 77.25],
    ));
    c.watchdog_timeout_ms = 30_000;
    c.nodes = fixtures::gauges(3, 2);
    c.decisions = vec![Decision {
        node: 1,
        threshold: 2,
        p_numa: 1.31,
        p_numa_source: PenaltySource::Measured,
        spill_contention: 0.25,
        curve: Some([0.05, 0.1, 1.0]),
        n_star: Some(2),
        exploring: false,
        placed: 3,
        p_cont: Some(1.42),
        iops: None,
        climb: None,
    }];
    c.io.at_ns = secs * 1_000_000_000;
    let ops = [
        (DevT::new(259, 0), Locality::Local, Op::Read, 900, 90_000),
        (DevT::new(259, 0), Locality::Remote, Op::Read, 100, 180_000),
        (DevT::new(259, 0), Locality::Local, Op::Write, 50, 400_000),
        (
            DevT::new(254, 0),
            Locality::Unknown,
            Op::Flush,
            5,
            2_000_000,
        ),
    ];
    for (dev, locality, op, per_sec, ns) in ops {
        let mut device = LatHist::default();
        let mut queue = LatHist::default();
        for _ in 0..secs * per_sec {
            device.record(ns);
            queue.record(ns / 9);
        }
        c.io.io.insert(
            IoKey { dev, locality, op },
            IoCounters {
                reqs: secs * per_sec,
                bytes: secs * per_sec * 4096,
                cross_completions: secs * per_sec / 20,
                queue,
                device,
            },
        );
    }
    c.io.nodes = BTreeMap::from([
        (
            0,
            NodeIo {
                reqs: secs * 105,
                bytes: secs * 105 * 4096,
                remote_reqs: secs * 100,
                remote_bytes: secs * 100 * 4096,
                completions: secs * 300,
                cross_completions: secs * 30,
            },
        ),
        (
            1,
            NodeIo {
                reqs: secs * 950,
                bytes: secs * 950 * 4096,
                completions: secs * 755,
                cross_completions: secs * 20,
                ..Default::default()
            },
        ),
    ]);
    c.io.tasks = BTreeMap::from([(
        4242,
        TaskIo {
            tid: 4242,
            tgid: 4240,
            comm: "fio".into(),
            reqs: secs * 1000,
            bytes: secs * 1000 * 4096,
            remote_reqs: secs * 100,
            last_node: Some(1),
            dominant_dev: Some(DevT::new(259, 0)),
            io_score: 96,
        },
    )]);
    c.io.io_ticks_ms = BTreeMap::from([(DevT::new(259, 0), secs * 640)]);
    c.io.cost = esn_stats::snapshot::BpfCost {
        run_time_ns: secs * 250_000_000,
        run_cnt: secs * 1_000_000,
    };
    c.io.started = secs * 1055;
    c.io.completed = secs * 1055;
    c
}

/// Compares with the recorded file, or records it under ESN_BLESS=1.
fn check(name: &str, got: &str) {
    let path = Path::new(GOLDEN).join(name);
    if std::env::var_os("ESN_BLESS").is_some() {
        std::fs::create_dir_all(GOLDEN).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (record it with ESN_BLESS=1 cargo test)",
            path.display()
        )
    });
    assert!(
        want == got,
        "{name} differs from {}; got:\n{got}",
        path.display()
    );
}

#[test]
fn outputs_match_the_recording() {
    let (before, now) = (recorded(10), recorded(12));
    let stats = interval(&before, &now, &devices());
    let text = render(&stats);
    check("stats.txt", &text);
    let json = serde_json::to_string(&stats).unwrap();
    check("stats.json", &format!("{json}\n"));
    // --monitor prints what it read back from the socket's JSON.
    let read_back: IntervalStats = serde_json::from_str(&json).unwrap();
    assert_eq!(render(&read_back), text);
    let metrics = metrics::exposition_text(Arc::new(now), &devices()).unwrap();
    check("metrics.txt", &metrics);
}
