//! The served interval against its description (`esn_reading::schema`): every
//! field of every struct, with every optional value present, so a field added
//! to the types without a description fails here.

use std::collections::BTreeMap;

use esn_controller::NodeWaits;
use esn_controller::{Decision, PenaltySource};
use esn_reading::schema::{self, mismatches, TOP};
use esn_reading::{Health, IntervalStats, NodeLoad};
use esn_stats::{
    CostReport, DeviceReport, EnergySource, EnergyStats, LatKind, LatencyReport, Locality,
    NodeEnergy, NodeReport, Op, Report, ReportKind, TaskReport, TrackingReport,
};
use esn_topology::devt::DevT;

fn full_interval() -> IntervalStats {
    let mut s = IntervalStats {
        counters: BTreeMap::from([
            ("place_local".to_string(), 12),
            ("io_stolen".to_string(), 1),
        ]),
        nodes: vec![NodeLoad {
            node: 1,
            placed: 2,
            threshold: 2,
            waits: NodeWaits {
                io_waits: 10,
                io_wait_ns: 25_000,
                fair_waits: 4,
                fair_wait_ns: 3_000,
                ..Default::default()
            },
            cpus: 2,
            busy_pct: Some(87.5),
            spill_in: 1,
            spill_out: 3,
            stolen_from: 1,
        }],
        control: vec![Decision {
            node: 1,
            threshold: 2,
            p_numa: 1.3,
            p_numa_source: PenaltySource::Measured,
            spill_contention: 0.0,
            curve: Some([0.1, 0.2, 0.7]),
            n_star: Some(2),
            exploring: true,
            placed: 2,
            p_cont: Some(1.2),
            iops: Some(2500.0),
            climb: Some("probing all".into()),
        }],
        health: Health {
            dispatched: 1000,
            fallbacks: 2,
            max_wait_ns: Some(1 << 20),
            watchdog_timeout_ms: 30_000,
        },
        energy: Some(EnergyStats {
            source: EnergySource::Estimated,
            nodes: vec![NodeEnergy {
                node: 1,
                joules: 54.5,
                watts: 54.5,
            }],
            joules: 54.5,
            watts: 54.5,
            joules_per_io: Some(0.02),
            tradeoff: Some(3.2),
        }),
        io: Report {
            kind: ReportKind::Interval,
            elapsed_s: 1.0,
            devices: vec![DeviceReport {
                name: "nvme0n1".into(),
                dev: DevT::new(259, 0),
                node: Some(1),
                reqs: 100,
                bytes: 409_600,
                iops: Some(100.0),
                mb_s: Some(0.4),
                reqs_by_op: BTreeMap::from([("read".to_string(), 100)]),
                local_reqs: 60,
                remote_reqs: 40,
                unknown_reqs: 0,
                remote_share: Some(0.4),
                cross_completions: 5,
                latency: vec![LatencyReport {
                    locality: Locality::Remote,
                    op: Op::Read,
                    kind: LatKind::Device,
                    count: 40,
                    mean_us: Some(90.0),
                    p50_us: Some(80.0),
                    p99_us: Some(300.0),
                }],
                util_pct: Some(50.0),
            }],
            nodes: vec![NodeReport {
                node: 0,
                reqs: 40,
                bytes: 163_840,
                remote_reqs: 40,
                remote_share: Some(1.0),
                completions: 35,
                cross_completions: 5,
            }],
            tasks: vec![TaskReport {
                tid: 42,
                tgid: 41,
                comm: "fio".into(),
                reqs: 100,
                bytes: 409_600,
                iops: Some(100.0),
                mb_s: Some(0.4),
                remote_reqs: 40,
                dominant_dev: Some("nvme0n1".into()),
                last_node: Some(0),
                home_node: Some(1),
                io_score: 900,
            }],
            bpf: CostReport {
                run_time_ns: 1000,
                run_cnt: 10,
                ns_per_event: Some(100.0),
                cpu_pct: Some(0.1),
            },
            tracking: TrackingReport {
                started: 100,
                completed: 100,
                untracked: 0,
                inflight_full: 0,
                aged_out: 0,
            },
            energy: None,
        },
    };
    // scx_esn observe's reports carry the energy themselves.
    s.io.energy = s.energy.clone();
    s
}

#[test]
fn a_full_interval_matches_its_description() {
    let v = serde_json::to_value(full_interval()).unwrap();
    let m = mismatches(TOP, &v);
    assert!(m.is_empty(), "{m:#?}");
}

#[test]
fn nulls_are_allowed_where_described_so() {
    let mut s = full_interval();
    s.nodes[0].busy_pct = None;
    s.control[0].curve = None;
    s.control[0].n_star = None;
    s.control[0].p_cont = None;
    s.health.max_wait_ns = None;
    s.io.devices[0].node = None;
    s.io.devices[0].iops = None;
    s.io.devices[0].util_pct = None;
    s.io.tasks[0].dominant_dev = None;
    s.io.tasks[0].home_node = None;
    let m = mismatches(TOP, &serde_json::to_value(s).unwrap());
    assert!(m.is_empty(), "{m:#?}");
}

#[test]
fn a_removed_description_is_noticed() {
    // The same interval with a field the table does not know.
    let mut v = serde_json::to_value(full_interval()).unwrap();
    v["io"]["devices"][0]["queue_depth"] = serde_json::json!(4);
    let m = mismatches(TOP, &v);
    assert_eq!(
        m,
        ["IntervalStats.io.devices[0].queue_depth: serialized but not described"]
    );
    assert!(schema::find("DeviceReport").is_some());
}
