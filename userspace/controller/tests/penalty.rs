//! Where P_numa comes from: the prior, the measurement, or the override.

mod common;

use common::*;
use esn_controller::{ControllerConfig, LatencyStat, NodeController, NodeSample, PenaltySource};

/// An interval with only latencies (no placed task, so no contention point).
fn latencies(local: f64, remote: f64, count: u64) -> NodeSample {
    NodeSample {
        placed: 0,
        local_lat: LatencyStat::new(count, local),
        remote_lat: LatencyStat::new(count, remote),
        run_delay: LatencyStat::default(),
        spill_delay: LatencyStat::default(),
        elapsed_s: 1.0,
        spill_room: None,
    }
}

#[test]
fn the_prior_stands_until_remote_requests_are_measured() {
    let mut sim = SimNode::new(3.0, 0.05);
    let mut ctrl = NodeController::new(0, DEMAND, DEMAND, &ControllerConfig::default());
    let mut in_force = ctrl.threshold();
    let mut last = None;
    for _ in 0..300 {
        let mut s = sim.sample(in_force);
        // No request from another node ever reaches this node's devices.
        s.remote_lat = LatencyStat::default();
        let d = ctrl.step(&s);
        assert_eq!(d.p_numa_source, PenaltySource::Prior);
        assert_eq!(d.p_numa, 1.3);
        in_force = d.threshold;
        last = Some(d);
    }
    // Balanced against the prior, whatever the unseen true penalty is.
    assert_eq!(learned(&last.unwrap()), 2);
}

#[test]
fn the_first_measurement_replaces_the_prior_then_averages() {
    let cfg = ControllerConfig::default();
    let mut ctrl = NodeController::new(0, 4, DEMAND, &cfg);
    let d = ctrl.step(&latencies(10_000.0, 20_000.0, 100));
    assert_eq!(d.p_numa_source, PenaltySource::Measured);
    assert_eq!(d.p_numa, 2.0);
    let d = ctrl.step(&latencies(10_000.0, 30_000.0, 100));
    assert!(
        (d.p_numa - (2.0 + cfg.numa_alpha * 1.0)).abs() < 1e-12,
        "{}",
        d.p_numa
    );
}

#[test]
fn too_few_requests_on_either_side_are_no_measurement() {
    let cfg = ControllerConfig::default();
    let mut ctrl = NodeController::new(0, 4, DEMAND, &cfg);
    let few = cfg.min_samples - 1;
    let mut s = latencies(10_000.0, 20_000.0, cfg.min_samples);
    s.remote_lat.count = few;
    assert_eq!(ctrl.step(&s).p_numa_source, PenaltySource::Prior);
    let mut s = latencies(10_000.0, 20_000.0, cfg.min_samples);
    s.local_lat.count = few;
    assert_eq!(ctrl.step(&s).p_numa_source, PenaltySource::Prior);
    let s = latencies(10_000.0, 20_000.0, cfg.min_samples);
    assert_eq!(ctrl.step(&s).p_numa_source, PenaltySource::Measured);
}

#[test]
fn measured_ratios_are_clamped_to_the_believable_range() {
    let mut ctrl = NodeController::new(0, 4, DEMAND, &ControllerConfig::default());
    // Remote faster than local: the interconnect cannot make requests cheaper.
    assert_eq!(ctrl.step(&latencies(10_000.0, 5_000.0, 100)).p_numa, 1.0);

    let cfg = ControllerConfig {
        numa_alpha: 1.0,
        ..ControllerConfig::default()
    };
    let mut ctrl = NodeController::new(0, 4, DEMAND, &cfg);
    assert_eq!(ctrl.step(&latencies(10.0, 1e9, 100)).p_numa, 10.0);
    // Even then one absurd interval moves the default average by alpha × the range.
    let mut ctrl = NodeController::new(0, 4, DEMAND, &ControllerConfig::default());
    ctrl.step(&latencies(10_000.0, 13_000.0, 100));
    let d = ctrl.step(&latencies(10.0, 1e9, 100));
    assert!((d.p_numa - (1.3 + 0.2 * 8.7)).abs() < 1e-9, "{}", d.p_numa);
}

#[test]
fn measurement_steers_the_threshold() {
    let mut sim = SimNode::new(3.0, 0.05);
    let mut ctrl = NodeController::new(0, 1, DEMAND, &ControllerConfig::default());
    let decisions = run(&mut ctrl, &mut sim, 300);
    let last = decisions.last().unwrap();
    assert_eq!(last.p_numa_source, PenaltySource::Measured);
    assert!((last.p_numa - 3.0).abs() < 1e-9);
    assert_eq!(learned(last), 8);
}

#[test]
fn the_override_wins_over_the_measurement() {
    let cfg = ControllerConfig {
        numa_penalty_override: Some(3.0),
        ..ControllerConfig::default()
    };
    // Remote requests measure as fast as local ones.
    let mut sim = SimNode::new(1.0, 0.05);
    for start in [1, DEMAND] {
        let mut ctrl = NodeController::new(0, start, DEMAND, &cfg);
        let decisions = run(&mut ctrl, &mut sim, 300);
        for d in &decisions {
            assert_eq!(d.p_numa_source, PenaltySource::Override);
            assert_eq!(d.p_numa, 3.0);
        }
        let at = settled_at(&decisions, 8).expect("settles on 8");
        assert!(at <= 150, "start {start}: settled at {at}");
    }
}

#[test]
fn without_the_override_the_same_node_spills_early() {
    // The control for the test above: measured at 1.0, no task is worth keeping
    // beyond the first.
    let mut sim = SimNode::new(1.0, 0.05);
    let mut ctrl = NodeController::new(0, DEMAND, DEMAND, &ControllerConfig::default());
    let decisions = run(&mut ctrl, &mut sim, 300);
    assert_eq!(learned(decisions.last().unwrap()), 1);
}

/// An interval at `placed` tasks whose contention reads `p_cont`, with P_numa
/// 1.0 measured and, when `spill` is given, a spilled task's wait of `spill`
/// local latencies on the next node.
fn contended(placed: u32, p_cont: f64, spill: Option<f64>) -> NodeSample {
    NodeSample {
        placed,
        local_lat: LatencyStat::new(COUNT, LOCAL_NS),
        remote_lat: LatencyStat::new(COUNT, LOCAL_NS),
        run_delay: LatencyStat::new(COUNT, (p_cont - 1.0) * LOCAL_NS),
        spill_delay: spill.map_or_else(LatencyStat::default, |w| {
            LatencyStat::new(COUNT, w * LOCAL_NS)
        }),
        elapsed_s: 1.0,
        spill_room: Some(1),
    }
}

/// Intervals of the spill's warm-up (a plain mean, no shed): 1 / alpha.
fn warm_up(cfg: &ControllerConfig) -> usize {
    (1.0 / cfg.numa_alpha).round() as usize
}

#[test]
fn the_spills_first_intervals_are_a_plain_mean_then_an_ewma() {
    let cfg = ControllerConfig::default();
    let mut ctrl = NodeController::new(0, 2, 4, &cfg);
    let warm_up = warm_up(&cfg);
    let mut seen = Vec::new();
    for i in 0..warm_up {
        // 0.02 first (a spilled task seen for part of the interval), then 0.10.
        let w = if i == 0 { 0.02 } else { 0.10 };
        seen.push(w);
        let d = ctrl.step(&contended(2, 1.0, Some(w)));
        let mean = seen.iter().sum::<f64>() / seen.len() as f64;
        assert!(
            (d.spill_contention - mean).abs() < 1e-12,
            "{i}: {}",
            d.spill_contention
        );
    }
    let before = ctrl.step(&contended(2, 1.0, None)).spill_contention;
    let d = ctrl.step(&contended(2, 1.0, Some(1.0)));
    assert!(
        (d.spill_contention - (before + cfg.numa_alpha * (1.0 - before))).abs() < 1e-12,
        "{}",
        d.spill_contention
    );
}

#[test]
fn no_task_is_shed_while_the_spills_cost_is_still_coming_in() {
    let cfg = ControllerConfig::default();
    let warm_up = warm_up(&cfg);
    // P_cont(2) 1.20 against P_numa 1.0 + spill 0.02: past the tie margin, so
    // the shed is due; the interval (1-based) that makes it.
    let first_shed = |spill: Option<f64>| {
        let mut ctrl = NodeController::new(0, 2, 4, &cfg);
        (1..=warm_up + cfg.confirm_intervals as usize + 2)
            .find(|_| learned(&ctrl.step(&contended(2, 1.2, spill))) == 1)
    };
    // Nothing spilled, so nothing to wait for: shed once the governor confirms.
    let unspilled = first_shed(None).expect("sheds without a spill");
    assert_eq!(unspilled, cfg.confirm_intervals as usize);
    // A spill being measured holds it through the warm-up, then it goes ahead
    // at once: the governor's confirmation ran on meanwhile.
    let spilled = first_shed(Some(0.02)).expect("sheds once the spill is known");
    assert_eq!(spilled, warm_up.max(unspilled), "warm-up {warm_up}");
}

#[test]
fn a_node_that_shed_on_start_up_figures_returns_when_an_exploration_reads_cheap() {
    // VM control H, the run CI failed on: P_cont(2) 1.13-1.18 in fio's first
    // seconds against a spill still reading low sheds a task; later the spill
    // reads 0.13 and an exploration at 2 reads below the rise line
    // (1.0 + 0.13) x 0.95, yet the start-up points at 2 outvoted it.
    let cfg = ControllerConfig::default();
    let mut ctrl = NodeController::new(0, 2, 2, &cfg);
    let mut second = 0;
    while learned(&ctrl.step(&contended(2, 1.18, Some(0.04)))) == 2 {
        second += 1;
        assert!(second < 20, "never shed on the start-up figures");
    }
    let mut explored = None;
    for second in 0..3 * cfg.explore_every as usize {
        let d = ctrl.step(&contended(1, 1.0, Some(0.13)));
        assert_eq!(learned(&d), 1, "second {second} at 1");
        if d.exploring {
            explored = Some(second);
            break;
        }
    }
    assert!(explored.is_some(), "never explored 2 again");
    let mut returned = false;
    let mut sample = contended(2, 1.04, Some(0.13));
    for _ in 0..=cfg.confirm_intervals {
        if learned(&ctrl.step(&sample)) == 2 {
            returned = true;
            break;
        }
        sample = contended(1, 1.0, Some(0.13));
    }
    assert!(returned, "kept at 1 by points from before the shed");
}
