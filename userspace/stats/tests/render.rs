//! The text form: readable, aligned, and never a panic.

use esn_stats::{
    build_report, render_text, CostReport, DeviceReport, IoCounters, IoKey, LatKind, LatencyReport,
    Locality, NodeIo, NodeReport, Op, RawSnapshot, Report, ReportKind, ReportOptions, TaskIo,
    TaskReport, TrackingReport,
};
use esn_topology::devt::{DevT, DeviceInfo, DeviceTable};

fn empty_report() -> Report {
    build_report(
        &RawSnapshot::default(),
        &RawSnapshot::default(),
        &DeviceTable::default(),
        &ReportOptions::default(),
    )
}

fn populated(comm: &str) -> Report {
    let nvme = DevT::new(259, 0);
    let table = DeviceTable::new(vec![DeviceInfo {
        name: "nvme0n1".into(),
        dev: nvme,
        node: Some(1),
        partitions: vec![],
    }]);
    let mut cur = RawSnapshot {
        at_ns: 1_000_000_000,
        ..Default::default()
    };
    let mut counters = |locality, op, n: u64, ns: u64| {
        let mut c = IoCounters {
            reqs: n,
            bytes: n * 4096,
            ..Default::default()
        };
        for _ in 0..n {
            c.device.record(ns);
            c.queue.record(ns / 8);
        }
        cur.io.insert(
            IoKey {
                dev: nvme,
                locality,
                op,
            },
            c,
        );
    };
    counters(Locality::Local, Op::Read, 12345, 18_000);
    counters(Locality::Remote, Op::Read, 500, 40_000);
    counters(Locality::Local, Op::Write, 300, 90_000);
    cur.io.insert(
        IoKey {
            dev: DevT::new(7, 3),
            locality: Locality::Unknown,
            op: Op::Read,
        },
        {
            let mut c = IoCounters {
                reqs: 1,
                bytes: 512,
                ..Default::default()
            };
            c.device.record(3000);
            c
        },
    );
    cur.nodes.insert(
        0,
        NodeIo {
            reqs: 500,
            remote_reqs: 500,
            completions: 10,
            ..Default::default()
        },
    );
    cur.nodes.insert(
        1,
        NodeIo {
            reqs: 12645,
            completions: 13135,
            cross_completions: 490,
            ..Default::default()
        },
    );
    cur.tasks.insert(
        42,
        TaskIo {
            tid: 42,
            tgid: 40,
            comm: comm.into(),
            reqs: 13000,
            bytes: 13000 * 4096,
            remote_reqs: 500,
            last_node: Some(1),
            dominant_dev: Some(nvme),
            io_score: 77,
        },
    );
    cur.cost.run_time_ns = 2_000_000;
    cur.cost.run_cnt = 40_000;
    cur.started = 13146;
    cur.completed = 13145;
    build_report(
        &RawSnapshot::default(),
        &cur,
        &table,
        &ReportOptions::default(),
    )
}

#[test]
fn empty_report_renders() {
    let text = render_text(&empty_report());
    assert!(text.starts_with("interval 0.00 s\n"), "{text}");
    assert!(text.contains("no block I/O seen"), "{text}");
    assert!(text.contains("kernel.bpf_stats_enabled"), "{text}");
}

#[test]
fn populated_report_shows_devices_nodes_tasks() {
    let text = render_text(&populated("fio"));
    println!("{text}");
    assert!(text.starts_with("interval 1.00 s\n"), "{text}");
    let dev_line = text
        .lines()
        .find(|l| l.starts_with("nvme0n1"))
        .unwrap_or_else(|| panic!("no device row in\n{text}"));
    assert!(dev_line.contains("13145"), "{dev_line}");
    assert!(dev_line.contains(" read"), "{dev_line}");
    // Local read p50 sits in [16.4, 32.8) us.
    let p50: f64 = dev_line
        .split_whitespace()
        .find_map(|w| w.split_once('/').and_then(|(a, _)| a.parse().ok()))
        .unwrap();
    assert!((16.0..33.0).contains(&p50), "{dev_line}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("write")),
        "write latency row missing:\n{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("7:3")), "{text}");
    assert!(text.contains("NO-NODE"), "unknown locality column:\n{text}");
    assert!(text.contains("COMPLETIONS"), "{text}");
    assert!(text.lines().any(|l| l.contains("fio") && l.contains("42")));
    assert!(text.contains("50.0 ns each"), "{text}");
    assert!(text.contains("13146 started"), "{text}");
    for l in text.lines() {
        assert!(l.chars().count() <= 100, "too wide ({}): {l}", l.len());
    }
}

#[test]
fn columns_line_up() {
    let text = render_text(&populated("fio"));
    let header = text.lines().find(|l| l.starts_with("DEVICE")).unwrap();
    let row = text.lines().find(|l| l.starts_with("nvme0n1")).unwrap();
    // Right-aligned columns end where their titles end.
    let end = header.find("IOPS").unwrap() + "IOPS".len();
    assert!(
        row[..end].ends_with(|c: char| c.is_ascii_digit()),
        "{header}\n{row}"
    );
    assert_eq!(row.as_bytes()[end], b' ', "{header}\n{row}");
}

#[test]
fn long_comm_does_not_break_the_table() {
    let comm = "x".repeat(100);
    let text = render_text(&populated(&comm));
    assert!(text.contains(&"x".repeat(16)));
    assert!(!text.contains(&"x".repeat(17)));
    let nasty = format!("a\nb\u{1b}[31m{}", "é".repeat(100));
    let text = render_text(&populated(&nasty));
    assert!(text.contains("a?b?[31m"), "{text}");
    assert!(!text.contains('\u{1b}'));
}

#[test]
fn huge_and_odd_numbers_do_not_panic() {
    let lat = |v: Option<f64>| LatencyReport {
        locality: Locality::Unknown,
        op: Op::Other,
        kind: LatKind::Device,
        count: u64::MAX,
        mean_us: v,
        p50_us: v,
        p99_us: v,
    };
    let report = Report {
        kind: ReportKind::Total,
        elapsed_s: f64::MAX,
        devices: vec![DeviceReport {
            name: "d".repeat(300),
            dev: DevT(u32::MAX),
            node: Some(u32::MAX),
            reqs: u64::MAX,
            bytes: u64::MAX,
            iops: Some(f64::MAX),
            mb_s: Some(f64::INFINITY),
            reqs_by_op: Default::default(),
            local_reqs: u64::MAX,
            remote_reqs: u64::MAX,
            unknown_reqs: u64::MAX,
            remote_share: Some(f64::NAN),
            cross_completions: u64::MAX,
            latency: vec![lat(Some(1e300)), lat(None), lat(Some(-5.0))],
            util_pct: Some(f64::NAN),
        }],
        nodes: vec![NodeReport {
            node: u32::MAX,
            reqs: u64::MAX,
            bytes: u64::MAX,
            remote_reqs: u64::MAX,
            remote_share: Some(1.0),
            completions: u64::MAX,
            cross_completions: u64::MAX,
        }],
        tasks: vec![TaskReport {
            tid: u32::MAX,
            tgid: u32::MAX,
            comm: String::new(),
            reqs: u64::MAX,
            bytes: u64::MAX,
            iops: Some(f64::NEG_INFINITY),
            mb_s: None,
            remote_reqs: u64::MAX,
            dominant_dev: Some("z".repeat(200)),
            last_node: None,
            home_node: Some(u32::MAX),
            io_score: u64::MAX,
        }],
        bpf: CostReport {
            run_time_ns: u64::MAX,
            run_cnt: 1,
            ns_per_event: Some(f64::MAX),
            cpu_pct: Some(f64::NAN),
        },
        tracking: TrackingReport {
            started: u64::MAX,
            completed: u64::MAX,
            untracked: u64::MAX,
            inflight_full: u64::MAX,
            aged_out: u64::MAX,
        },
        energy: None,
    };
    let text = render_text(&report);
    assert!(text.starts_with("total "), "{text}");
    assert!(text.contains("other"));
    assert!(text.contains("18.4E"), "{text}");

    let mut nan = report.clone();
    nan.elapsed_s = f64::NAN;
    nan.devices.clear();
    assert!(render_text(&nan).starts_with("total 0.00 s"));
}

#[test]
fn observe_reports_carry_the_energy_line_and_json_field() {
    use esn_stats::energy::{EnergySource, EnergyStats, NodeEnergy};
    let mut report = populated("fio");
    assert!(!render_text(&report).contains("energy"));
    let json = serde_json::to_value(&report).unwrap();
    assert!(json.get("energy").is_none(), "no meter, no field: {json}");

    let energy = EnergyStats {
        source: EnergySource::Estimated,
        nodes: vec![
            NodeEnergy {
                node: 0,
                joules: 54.5,
                watts: 54.5,
            },
            NodeEnergy {
                node: 1,
                joules: 40.4,
                watts: 40.4,
            },
        ],
        joules: 94.9,
        watts: 94.9,
        joules_per_io: None,
        tradeoff: None,
    };
    report.energy = Some(energy.with_io(&report));
    let text = render_text(&report);
    assert!(
        text.contains("energy (estimated): node 0 54.5 W, node 1 40.4 W; total 94.9 W (94.9 J)"),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["energy"]["source"], "estimated");
    assert!(json["energy"]["joules_per_io"].as_f64().unwrap() > 0.0);
}

/// `scx_esn energy`'s two forms, exactly as the VM edges test reads them.
#[test]
fn energy_window_line_and_json() {
    use esn_stats::energy::{EnergySource, EnergyStats, NodeEnergy};
    let e = EnergyStats {
        source: EnergySource::Estimated,
        nodes: vec![NodeEnergy {
            node: 0,
            joules: 287.36,
            watts: 95.0,
        }],
        joules: 287.36,
        watts: 95.0,
        joules_per_io: Some(0.1),
        tradeoff: Some(2.0),
    };
    assert_eq!(
        e.window_line(3.02),
        "energy (estimated) over 3.0 s: node 0 287.4 J (95.0 W); total 287.4 J (95.0 W)"
    );
    assert_eq!(
        e.window_json(3.02).to_string(),
        r#"{"elapsed_s":3.02,"joules":287.36,"nodes":[{"joules":287.36,"node":0,"watts":95.0}],"source":"estimated","watts":95.0}"#
    );
}
