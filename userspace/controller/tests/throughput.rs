//! The throughput objective through the public API: a node keeps more I/O-bound
//! tasks than it has CPUs when its devices complete more that way, and the latency
//! objective's bound of one task per CPU stays where it was.

use esn_controller::{
    ControllerConfig, LatencyStat, NodeController, NodeSample, Objective, TASKS_PER_CPU,
};

/// One 1 s interval with `placed` tasks on the node and `iops` completions.
fn interval(placed: u32, iops: u64) -> NodeSample {
    NodeSample {
        placed,
        local_lat: LatencyStat::new(iops, 500_000.0),
        remote_lat: LatencyStat::new(0, 0.0),
        run_delay: LatencyStat::new(iops, 400_000.0),
        spill_delay: LatencyStat::default(),
        elapsed_s: 1.0,
        spill_room: None,
    }
}

/// The lab at 8 jobs on a 2-CPU node: every job local completes twice as much.
fn lab(placed: u32) -> u64 {
    if placed >= 8 {
        2800
    } else {
        1400
    }
}

fn run(ctrl: &mut NodeController, demand: u32, intervals: usize) -> Vec<u32> {
    let mut in_force = ctrl.threshold();
    let mut learned = Vec::new();
    for _ in 0..intervals {
        let placed = in_force.min(demand);
        let d = ctrl.step(&interval(placed, lab(placed)));
        in_force = d.threshold;
        learned.push(ctrl.threshold());
        assert!(d.iops.is_some());
        assert!(d.climb.is_some());
    }
    learned
}

#[test]
fn throughput_keeps_every_job_local_when_that_completes_more() {
    let cfg = ControllerConfig {
        objective: Objective::Throughput,
        ..Default::default()
    };
    let mut ctrl = NodeController::new(1, 2, 2, &cfg);
    let learned = run(&mut ctrl, 8, 20);
    assert_eq!(*learned.last().unwrap(), 8, "{learned:?}");
    assert_eq!(ctrl.threshold(), 8.min(2 * TASKS_PER_CPU));
}

#[test]
fn latency_objective_still_stops_at_the_cpu_count() {
    let mut ctrl = NodeController::new(1, 2, 2, &ControllerConfig::default());
    for _ in 0..200 {
        let d = ctrl.step(&interval(2, 1000));
        assert!(d.threshold <= 2, "{d:?}");
        assert_eq!((d.iops, d.climb.as_deref()), (None, None));
    }
}

#[test]
fn the_objective_reads_and_writes_as_a_lowercase_word() {
    let cfg: ControllerConfig = serde_json::from_str(r#"{"objective": "throughput"}"#).unwrap();
    assert_eq!(cfg.objective, Objective::Throughput);
    assert!(serde_json::to_string(&ControllerConfig::default())
        .unwrap()
        .contains(r#""objective":"latency""#));
}
