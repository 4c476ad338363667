//! build_report over synthetic snapshots, and the JSON schema it serializes to.

use std::collections::BTreeSet;

use esn_stats::{
    build_report, BpfCost, IoCounters, IoKey, LatHist, LatKind, Locality, NodeIo, Op, RawSnapshot,
    Report, ReportKind, ReportOptions, TaskIo,
};
use esn_topology::devt::{DevT, DeviceInfo, DeviceTable};
use serde_json::Value;

const NVME0: DevT = DevT(259 << 20);
const NVME0P1: DevT = DevT((259 << 20) | 1);
const NVME1: DevT = DevT((259 << 20) | 2);
const LOOP3: DevT = DevT((7 << 20) | 3);

fn devices() -> DeviceTable {
    DeviceTable::new(vec![
        DeviceInfo {
            name: "nvme1n1".into(),
            dev: NVME1,
            node: Some(1),
            partitions: vec![],
        },
        DeviceInfo {
            name: "nvme0n1".into(),
            dev: NVME0,
            node: Some(0),
            partitions: vec![NVME0P1],
        },
    ])
}

fn key(dev: DevT, locality: Locality, op: Op) -> IoKey {
    IoKey { dev, locality, op }
}

/// `reqs` requests of `size` bytes, each taking `lat_ns` on the device and a tenth
/// of that in the queue.
fn io(reqs: u64, size: u64, lat_ns: u64) -> IoCounters {
    let mut c = IoCounters {
        reqs,
        bytes: reqs * size,
        ..Default::default()
    };
    for _ in 0..reqs {
        c.device.record(lat_ns);
        c.queue.record(lat_ns / 10);
    }
    c
}

fn plus(a: &IoCounters, b: &IoCounters) -> IoCounters {
    let mut s = a.clone();
    s.merge(b);
    s
}

fn task(tid: u32, comm: &str, reqs: u64, dev: Option<DevT>) -> TaskIo {
    TaskIo {
        tid,
        tgid: tid,
        comm: comm.into(),
        reqs,
        bytes: reqs * 4096,
        remote_reqs: reqs / 4,
        last_node: Some(tid % 2),
        dominant_dev: dev,
        io_score: reqs * 3,
    }
}

/// Two snapshots two seconds apart.
fn snapshots() -> (RawSnapshot, RawSnapshot) {
    let mut prev = RawSnapshot {
        at_ns: 1_000_000_000,
        ..Default::default()
    };
    let mut cur = RawSnapshot {
        at_ns: 3_000_000_000,
        ..Default::default()
    };

    let lr0 = io(200, 4096, 20_000);
    prev.io
        .insert(key(NVME0, Locality::Local, Op::Read), lr0.clone());
    cur.io.insert(
        key(NVME0, Locality::Local, Op::Read),
        plus(&lr0, &io(800, 4096, 20_000)),
    );
    let rr0 = io(10, 4096, 50_000);
    prev.io
        .insert(key(NVME0, Locality::Remote, Op::Read), rr0.clone());
    let mut rr1 = plus(&rr0, &io(200, 4096, 50_000));
    rr1.cross_completions = 30;
    cur.io.insert(key(NVME0, Locality::Remote, Op::Read), rr1);
    // The partition's key appears only now: all of it is new.
    cur.io.insert(
        key(NVME0P1, Locality::Local, Op::Write),
        io(100, 1 << 20, 100_000),
    );
    // Idle: unchanged.
    let idle = io(5, 512, 1000);
    prev.io
        .insert(key(NVME1, Locality::Local, Op::Read), idle.clone());
    cur.io.insert(key(NVME1, Locality::Local, Op::Read), idle);
    // Unknown device, no home node.
    cur.io
        .insert(key(LOOP3, Locality::Unknown, Op::Read), io(50, 4096, 3000));

    prev.nodes.insert(
        0,
        NodeIo {
            reqs: 210,
            bytes: 210 * 4096,
            remote_reqs: 0,
            remote_bytes: 0,
            completions: 200,
            cross_completions: 0,
        },
    );
    cur.nodes.insert(
        0,
        NodeIo {
            reqs: 1110,
            bytes: 1110 * 4096,
            remote_reqs: 0,
            remote_bytes: 0,
            completions: 1100,
            cross_completions: 30,
        },
    );
    let n1 = NodeIo {
        reqs: 10,
        bytes: 40960,
        remote_reqs: 10,
        remote_bytes: 40960,
        completions: 10,
        cross_completions: 0,
    };
    prev.nodes.insert(1, n1);
    let mut n1b = n1;
    n1b.reqs += 200;
    n1b.remote_reqs += 200;
    n1b.bytes += 200 * 4096;
    n1b.remote_bytes += 200 * 4096;
    cur.nodes.insert(1, n1b);
    // A node seen only in prev is gone from cur: not listed.
    prev.nodes.insert(2, n1);

    prev.tasks.insert(10, task(10, "fio", 1000, Some(NVME0)));
    cur.tasks.insert(10, task(10, "fio", 1400, Some(NVME0P1)));
    prev.tasks.insert(11, task(11, "fio", 50, Some(NVME0)));
    cur.tasks.insert(11, task(11, "fio", 450, Some(NVME0)));
    cur.tasks.insert(12, task(12, "dd", 100, Some(LOOP3)));
    prev.tasks.insert(13, task(13, "idle", 70, Some(NVME1)));
    cur.tasks.insert(13, task(13, "idle", 70, Some(NVME1)));
    // Dropped by the LRU and back from zero: its 20 are all new.
    prev.tasks.insert(14, task(14, "rocksdb", 5000, None));
    cur.tasks.insert(14, task(14, "rocksdb", 20, None));
    cur.tasks.insert(9, task(9, "postgres", 400, Some(NVME1)));

    prev.cost = BpfCost {
        run_time_ns: 1000,
        run_cnt: 10,
    };
    cur.cost = BpfCost {
        run_time_ns: 51_000,
        run_cnt: 110,
    };

    prev.started = 100;
    cur.started = 1300;
    prev.completed = 90;
    cur.completed = 1290;
    cur.untracked = 4;
    prev.inflight_full = 7;
    cur.inflight_full = 2; // reset: taken whole
    cur.aged_out = 1;

    (prev, cur)
}

fn opts() -> ReportOptions {
    ReportOptions {
        device_filter: vec![],
        top_tasks: 3,
        kind: ReportKind::Interval,
    }
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-9 * b.abs().max(1.0))
}

#[test]
fn device_rows_rates_and_shares() {
    let (prev, cur) = snapshots();
    let r = build_report(&prev, &cur, &devices(), &opts());
    assert_eq!(r.kind, ReportKind::Interval);
    assert!((r.elapsed_s - 2.0).abs() < 1e-12);

    let names: Vec<&str> = r.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["7:3", "nvme0n1", "nvme1n1"], "sorted by name");

    let d = &r.devices[1];
    assert_eq!(d.dev, NVME0);
    assert_eq!(d.node, Some(0));
    // 800 local reads + 200 remote reads + 100 writes on the partition.
    assert_eq!(d.reqs, 1100);
    let bytes = 1000 * 4096 + 100 * (1 << 20);
    assert_eq!(d.bytes, bytes);
    assert!(close(d.iops, 550.0), "{:?}", d.iops);
    assert!(close(d.mb_s, bytes as f64 / 2.0 / 1e6), "{:?}", d.mb_s);
    assert_eq!(d.local_reqs, 900);
    assert_eq!(d.remote_reqs, 200);
    assert_eq!(d.unknown_reqs, 0);
    assert!(close(d.remote_share, 200.0 / 1100.0));
    assert_eq!(d.cross_completions, 30);
    let ops: Vec<(&str, u64)> = d.reqs_by_op.iter().map(|(k, &v)| (k.as_str(), v)).collect();
    assert_eq!(
        ops,
        [("read", 1000), ("write", 100)],
        "only ops with requests"
    );

    // Idle since prev, still listed.
    let idle = &r.devices[2];
    assert_eq!((idle.reqs, idle.bytes), (0, 0));
    assert_eq!(idle.iops, Some(0.0));
    assert_eq!(idle.mb_s, Some(0.0));
    assert_eq!(idle.remote_share, None);
    assert!(idle.reqs_by_op.is_empty());
    assert!(idle.latency.is_empty());

    // Unknown to the table: named by number, no node, all of unknown locality.
    let lo = &r.devices[0];
    assert_eq!((lo.dev, lo.node, lo.reqs), (LOOP3, None, 50));
    assert_eq!((lo.unknown_reqs, lo.local_reqs, lo.remote_reqs), (50, 0, 0));
    assert_eq!(lo.remote_share, None);
}

#[test]
fn latency_entries_per_locality_op_and_kind() {
    let (prev, cur) = snapshots();
    let r = build_report(&prev, &cur, &devices(), &opts());
    let d = r.devices.iter().find(|d| d.name == "nvme0n1").unwrap();
    let keys: Vec<(Locality, Op, LatKind, u64)> = d
        .latency
        .iter()
        .map(|l| (l.locality, l.op, l.kind, l.count))
        .collect();
    assert_eq!(
        keys,
        [
            (Locality::Local, Op::Read, LatKind::Queue, 800),
            (Locality::Local, Op::Read, LatKind::Device, 800),
            (Locality::Local, Op::Write, LatKind::Queue, 100),
            (Locality::Local, Op::Write, LatKind::Device, 100),
            (Locality::Remote, Op::Read, LatKind::Queue, 200),
            (Locality::Remote, Op::Read, LatKind::Device, 200),
        ]
    );
    let local_read = &d.latency[1];
    // 20 us samples fall in [16.384, 32.768) us; the mean is exact.
    assert!(close(local_read.mean_us, 20.0), "{:?}", local_read.mean_us);
    for p in [local_read.p50_us, local_read.p99_us] {
        let p = p.unwrap();
        assert!((16.384..=32.768).contains(&p), "{p}");
    }
    let remote_read = &d.latency[5];
    assert!(remote_read.p50_us.unwrap() > local_read.p99_us.unwrap());
}

#[test]
fn node_rows_cover_every_node_in_cur() {
    let (prev, cur) = snapshots();
    let r = build_report(&prev, &cur, &devices(), &opts());
    let ids: Vec<u32> = r.nodes.iter().map(|n| n.node).collect();
    assert_eq!(ids, [0, 1]);
    let n0 = &r.nodes[0];
    assert_eq!((n0.reqs, n0.remote_reqs), (900, 0));
    assert_eq!(n0.bytes, 900 * 4096);
    assert_eq!(n0.remote_share, Some(0.0));
    assert_eq!((n0.completions, n0.cross_completions), (900, 30));
    let n1 = &r.nodes[1];
    assert_eq!((n1.reqs, n1.remote_reqs), (200, 200));
    assert_eq!(n1.remote_share, Some(1.0));
    assert_eq!(n1.completions, 0);

    // A node with nothing at all in the interval stays listed.
    let mut later = cur.clone();
    later.at_ns += 1_000_000_000;
    let r = build_report(&cur, &later, &devices(), &opts());
    assert_eq!(r.nodes.len(), 2);
    assert!(r
        .nodes
        .iter()
        .all(|n| n.reqs == 0 && n.remote_share.is_none()));
}

#[test]
fn node_counter_reset_takes_current_values() {
    let (prev, mut cur) = snapshots();
    cur.nodes.insert(
        1,
        NodeIo {
            reqs: 3,
            remote_reqs: 1,
            ..Default::default()
        },
    );
    let r = build_report(&prev, &cur, &devices(), &opts());
    let n1 = r.nodes.iter().find(|n| n.node == 1).unwrap();
    assert_eq!((n1.reqs, n1.remote_reqs, n1.bytes), (3, 1, 0));
}

#[test]
fn top_tasks_by_requests_then_tid() {
    let (prev, cur) = snapshots();
    let mut o = opts();
    o.top_tasks = 10;
    let r = build_report(&prev, &cur, &devices(), &o);
    let got: Vec<(u32, u64)> = r.tasks.iter().map(|t| (t.tid, t.reqs)).collect();
    // 9, 10 and 11 tie at 400 and go by tid; 13 did nothing and is left out; 14
    // came back from zero and counts 20, not a wrapped-around difference.
    assert_eq!(got, [(9, 400), (10, 400), (11, 400), (12, 100), (14, 20)]);

    let fio = &r.tasks[1];
    assert_eq!(fio.comm, "fio");
    assert_eq!(fio.tgid, 10);
    assert_eq!(fio.bytes, 400 * 4096);
    assert!(close(fio.iops, 200.0));
    assert!(close(fio.mb_s, 400.0 * 4096.0 / 2.0 / 1e6));
    assert_eq!(fio.remote_reqs, 350 - 250);
    // A partition is shown as its disk.
    assert_eq!(fio.dominant_dev.as_deref(), Some("nvme0n1"));
    assert_eq!(fio.last_node, Some(0));
    assert_eq!(fio.io_score, 1400 * 3, "gauges come from cur");
    assert_eq!(r.tasks[3].dominant_dev.as_deref(), Some("7:3"));
    assert_eq!(r.tasks[4].dominant_dev, None);

    // Cut off at top_tasks.
    let r = build_report(&prev, &cur, &devices(), &opts());
    let tids: Vec<u32> = r.tasks.iter().map(|t| t.tid).collect();
    assert_eq!(tids, [9, 10, 11]);
    let mut o = opts();
    o.top_tasks = 0;
    assert!(build_report(&prev, &cur, &devices(), &o).tasks.is_empty());
}

#[test]
fn device_filter_keeps_only_named_disks() {
    let (prev, cur) = snapshots();
    let mut o = opts();
    // A partition selects its whole disk, whose row includes the partition's I/O.
    o.device_filter = vec![NVME0P1];
    let r = build_report(&prev, &cur, &devices(), &o);
    assert_eq!(r.devices.len(), 1);
    assert_eq!(r.devices[0].name, "nvme0n1");
    assert_eq!(r.devices[0].reqs, 1100);

    o.device_filter = vec![LOOP3, NVME1];
    let r = build_report(&prev, &cur, &devices(), &o);
    let names: Vec<&str> = r.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["7:3", "nvme1n1"]);
    // Machine-wide tables are not filtered.
    assert_eq!(r.nodes.len(), 2);
    assert_eq!(r.tasks.len(), 3);

    o.device_filter = vec![DevT::new(1, 1)];
    assert!(build_report(&prev, &cur, &devices(), &o).devices.is_empty());
}

#[test]
fn partition_keys_fold_into_the_disk_row() {
    let mut prev = RawSnapshot::default();
    let mut cur = RawSnapshot {
        at_ns: 1_000_000_000,
        ..Default::default()
    };
    cur.io
        .insert(key(NVME0, Locality::Local, Op::Read), io(10, 4096, 8000));
    cur.io
        .insert(key(NVME0P1, Locality::Local, Op::Read), io(5, 4096, 8000));
    prev.io
        .insert(key(NVME0P1, Locality::Local, Op::Read), io(1, 4096, 8000));
    let r = build_report(&prev, &cur, &devices(), &opts());
    assert_eq!(r.devices.len(), 1, "{:?}", r.devices);
    let d = &r.devices[0];
    assert_eq!((d.name.as_str(), d.dev, d.reqs), ("nvme0n1", NVME0, 14));
    let device_lat: Vec<u64> = d
        .latency
        .iter()
        .filter(|l| l.kind == LatKind::Device)
        .map(|l| l.count)
        .collect();
    assert_eq!(device_lat, [14], "histograms merged into one entry");
}

#[test]
fn io_entry_reset_never_wraps() {
    let (prev, mut cur) = snapshots();
    // Recreated entry: fewer requests than before, but more bytes already.
    let k = key(NVME0, Locality::Local, Op::Read);
    let mut fresh = io(3, 1 << 30, 20_000);
    fresh.cross_completions = 1;
    cur.io.insert(k, fresh);
    let r = build_report(&prev, &cur, &devices(), &opts());
    let d = r.devices.iter().find(|d| d.name == "nvme0n1").unwrap();
    assert_eq!(d.reqs, 3 + 200 + 100);
    assert_eq!(d.bytes, 3 * (1 << 30) + 200 * 4096 + 100 * (1 << 20));
    assert_eq!(d.cross_completions, 1 + 30);
    for l in &d.latency {
        assert!(l.count < 1 << 32, "{l:?}");
    }
}

#[test]
fn cost_and_tracking_deltas() {
    let (prev, cur) = snapshots();
    let r = build_report(&prev, &cur, &devices(), &opts());
    assert_eq!((r.bpf.run_time_ns, r.bpf.run_cnt), (50_000, 100));
    assert!(close(r.bpf.ns_per_event, 500.0));
    // 50 us over 2 s.
    assert!(close(r.bpf.cpu_pct, 0.0025), "{:?}", r.bpf.cpu_pct);

    let t = &r.tracking;
    assert_eq!((t.started, t.completed, t.untracked), (1200, 1200, 4));
    assert_eq!((t.inflight_full, t.aged_out), (2, 1));

    // Stats disabled: nothing counted, nothing claimed.
    let mut off = cur.clone();
    off.cost = BpfCost::default();
    let r = build_report(&RawSnapshot::default(), &off, &devices(), &opts());
    assert_eq!((r.bpf.run_time_ns, r.bpf.run_cnt), (0, 0));
    assert_eq!((r.bpf.ns_per_event, r.bpf.cpu_pct), (None, None));
}

#[test]
fn zero_elapsed_gives_no_rates() {
    let (mut prev, cur) = snapshots();
    prev.at_ns = cur.at_ns;
    let r = build_report(&prev, &cur, &devices(), &opts());
    assert_eq!(r.elapsed_s, 0.0);
    assert!(!r.devices.is_empty() && !r.tasks.is_empty());
    for d in &r.devices {
        assert_eq!((d.iops, d.mb_s), (None, None), "{}", d.name);
    }
    for t in &r.tasks {
        assert_eq!((t.iops, t.mb_s), (None, None));
    }
    assert_eq!(r.bpf.cpu_pct, None);
    assert!(r.bpf.ns_per_event.is_some(), "per-event cost needs no time");
    // Counts are still there.
    assert_eq!(r.devices[1].reqs, 1100);

    // A clock that went back is not a negative interval.
    let mut later = prev.clone();
    later.at_ns = cur.at_ns + 5;
    let r = build_report(&later, &cur, &devices(), &opts());
    assert_eq!(r.elapsed_s, 0.0);
    assert_eq!(r.devices[1].iops, None);
}

#[test]
fn totals_since_start_from_the_empty_snapshot() {
    let (_, cur) = snapshots();
    let mut o = opts();
    o.kind = ReportKind::Total;
    let r = build_report(&RawSnapshot::default(), &cur, &devices(), &o);
    assert_eq!(r.kind, ReportKind::Total);
    assert!((r.elapsed_s - 3.0).abs() < 1e-12);
    let d = r.devices.iter().find(|d| d.name == "nvme0n1").unwrap();
    assert_eq!(d.reqs, 1000 + 210 + 100);
    let idle = r.devices.iter().find(|d| d.name == "nvme1n1").unwrap();
    assert_eq!(idle.reqs, 5);
    assert_eq!(r.tasks[0].tid, 10);
    assert_eq!(r.tasks[0].reqs, 1400);
    assert_eq!(r.tracking.started, 1300);
}

#[test]
fn empty_snapshots_give_an_empty_report() {
    let r = build_report(
        &RawSnapshot::default(),
        &RawSnapshot::default(),
        &DeviceTable::default(),
        &ReportOptions::default(),
    );
    assert_eq!(r.elapsed_s, 0.0);
    assert!(r.devices.is_empty() && r.nodes.is_empty() && r.tasks.is_empty());
    assert_eq!(r.bpf.ns_per_event, None);
    assert_eq!(r.tracking.started, 0);
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn set<'a>(names: &[&'a str]) -> BTreeSet<&'a str> {
    names.iter().copied().collect()
}

#[test]
fn json_schema_field_names() {
    let (prev, cur) = snapshots();
    let r = build_report(&prev, &cur, &devices(), &opts());
    let v = serde_json::to_value(&r).unwrap();

    assert_eq!(
        keys(&v),
        set(&[
            "kind",
            "elapsed_s",
            "devices",
            "nodes",
            "tasks",
            "bpf",
            "tracking"
        ])
    );
    assert_eq!(v["kind"], "interval");

    let d = &v["devices"][1];
    assert_eq!(
        keys(d),
        set(&[
            "name",
            "dev",
            "node",
            "reqs",
            "bytes",
            "iops",
            "mb_s",
            "reqs_by_op",
            "local_reqs",
            "remote_reqs",
            "unknown_reqs",
            "remote_share",
            "cross_completions",
            "latency",
            "util_pct",
        ])
    );
    assert_eq!(d["name"], "nvme0n1");
    assert_eq!(d["dev"], "259:0");
    assert_eq!(d["node"], 0);
    assert_eq!(d["reqs_by_op"]["read"], 1000);
    assert_eq!(d["reqs_by_op"]["write"], 100);

    let l = &d["latency"][1];
    assert_eq!(
        keys(l),
        set(&["locality", "op", "kind", "count", "mean_us", "p50_us", "p99_us"])
    );
    assert_eq!(l["locality"], "local");
    assert_eq!(l["op"], "read");
    assert_eq!(l["kind"], "device");
    assert_eq!(d["latency"][0]["kind"], "queue");
    assert_eq!(d["latency"][4]["locality"], "remote");
    assert_eq!(v["devices"][0]["latency"][0]["locality"], "unknown");

    // None is null, not a missing key.
    assert_eq!(v["devices"][0]["node"], Value::Null);
    assert_eq!(v["devices"][2]["remote_share"], Value::Null);

    assert_eq!(
        keys(&v["nodes"][0]),
        set(&[
            "node",
            "reqs",
            "bytes",
            "remote_reqs",
            "remote_share",
            "completions",
            "cross_completions",
        ])
    );
    assert_eq!(
        keys(&v["tasks"][0]),
        set(&[
            "tid",
            "tgid",
            "comm",
            "reqs",
            "bytes",
            "iops",
            "mb_s",
            "remote_reqs",
            "dominant_dev",
            "last_node",
            "home_node",
            "io_score",
        ])
    );
    assert_eq!(v["tasks"][0]["dominant_dev"], "nvme1n1");
    assert_eq!(
        keys(&v["bpf"]),
        set(&["run_time_ns", "run_cnt", "ns_per_event", "cpu_pct"])
    );
    assert_eq!(
        keys(&v["tracking"]),
        set(&[
            "started",
            "completed",
            "untracked",
            "inflight_full",
            "aged_out"
        ])
    );

    // One line per report, and it reads back.
    let line = r.to_json_line().unwrap();
    assert!(!line.contains('\n'));
    // serde_json's default float parsing may differ in the last bit, so compare
    // what is exact.
    let back: Report = serde_json::from_str(&line).unwrap();
    assert_eq!(back.devices.len(), r.devices.len());
    assert_eq!(back.devices[1].dev, NVME0);
    assert_eq!(back.devices[1].latency.len(), r.devices[1].latency.len());
    assert_eq!(back.tasks, r.tasks);
    assert_eq!(back.tracking, r.tracking);
}

#[test]
fn enums_serialize_lowercase() {
    let s = |v: Value| v.as_str().unwrap().to_string();
    let all_loc: Vec<String> = Locality::ALL
        .iter()
        .map(|l| s(serde_json::to_value(l).unwrap()))
        .collect();
    assert_eq!(all_loc, ["local", "remote", "unknown"]);
    let all_op: Vec<String> = Op::ALL
        .iter()
        .map(|o| s(serde_json::to_value(o).unwrap()))
        .collect();
    assert_eq!(all_op, ["read", "write", "flush", "discard", "other"]);
    for o in Op::ALL {
        assert_eq!(s(serde_json::to_value(o).unwrap()), o.as_str());
    }
    assert_eq!(s(serde_json::to_value(ReportKind::Total).unwrap()), "total");
    assert_eq!(s(serde_json::to_value(LatKind::Queue).unwrap()), "queue");
    assert_eq!(
        serde_json::to_value(BpfCost {
            run_time_ns: 1,
            run_cnt: 2
        })
        .unwrap(),
        serde_json::json!({"run_time_ns": 1, "run_cnt": 2})
    );
}

#[test]
fn default_lat_hist_is_empty() {
    assert_eq!(LatHist::default().total(), 0);
}

#[test]
fn utilisation_from_io_ticks_and_the_tasks_home_node() {
    let mut prev = RawSnapshot {
        at_ns: 1_000_000_000,
        ..Default::default()
    };
    prev.io
        .insert(key(NVME0, Locality::Local, Op::Read), io(1, 4096, 1000));
    prev.io_ticks_ms.insert(NVME0, 5_000);
    let mut cur = prev.clone();
    cur.at_ns = 3_000_000_000;
    cur.io
        .insert(key(NVME0, Locality::Local, Op::Read), io(9, 4096, 1000));
    cur.io
        .insert(key(NVME1, Locality::Remote, Op::Read), io(2, 4096, 1000));
    cur.io_ticks_ms.insert(NVME0, 6_500);
    cur.tasks.insert(7, task(7, "fio", 8, Some(NVME0P1)));
    let r = build_report(&prev, &cur, &devices(), &opts());
    let by_name = |n: &str| r.devices.iter().find(|d| d.name == n).unwrap();
    // 1.5 s busy of 2 s.
    assert_eq!(by_name("nvme0n1").util_pct, Some(75.0));
    // No io_ticks read for that disk: unknown, not 0 %.
    assert_eq!(by_name("nvme1n1").util_pct, None);
    // A partition's task is homed on its disk's node.
    assert_eq!(r.tasks[0].home_node, Some(0));
    let text = esn_stats::render_text(&r);
    assert!(text.contains("UTIL%"), "{text}");
}

#[test]
fn io_ticks_is_the_tenth_field_of_sysfs_stat() {
    let stat = "  1234  0  98304  500  10  0  80  5  0  4321  505  0 0 0 0 0 0\n";
    assert_eq!(esn_stats::snapshot::io_ticks_from_stat(stat), Some(4321));
    assert_eq!(esn_stats::snapshot::io_ticks_from_stat("1 2 3"), None);
}
