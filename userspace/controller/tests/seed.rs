//! Starting from a profile run: a seeded controller uses the profiled curve and
//! penalty at once, and goes on learning from live intervals.

mod common;

use common::*;
use esn_controller::{ControllerConfig, NodeController, PenaltySource};

fn profiled_points(upto: u32) -> Vec<(u32, f64)> {
    (1..=upto).map(|n| (n, p_cont(SHAPE, n))).collect()
}

#[test]
fn a_seeded_controller_starts_with_the_profiled_curve_and_penalty() {
    let cfg = ControllerConfig::default();
    let mut ctrl = NodeController::new(1, 16, DEMAND, &cfg);
    let balance = analytic_threshold(SHAPE, 3.0);
    ctrl.seed(&profiled_points(12), Some(3.0), balance);
    assert_eq!(ctrl.threshold(), balance);

    let mut sim = SimNode::new(3.0, 0.0);
    let first = ctrl.step(&sim.sample(ctrl.threshold()));
    assert_eq!(first.p_numa_source, PenaltySource::Measured);
    assert!((first.p_numa - 3.0).abs() < 0.01, "{first:?}");
    let curve = first.curve.expect("three distinct n were seeded");
    for (got, want) in curve.iter().zip(SHAPE) {
        assert!((got - want).abs() < 0.01, "curve {curve:?} vs {SHAPE:?}");
    }
    assert_eq!(first.n_star, Some(balance), "{first:?}");
    // And it holds there on live intervals that agree with the profile.
    let trace: Vec<u32> = run(&mut ctrl, &mut sim, 60).iter().map(learned).collect();
    assert!(trace.iter().all(|&t| t == balance), "{trace:?}");
}

#[test]
fn seeding_skips_points_that_cannot_be_real_and_clamps_the_threshold() {
    let cfg = ControllerConfig::default();
    // Two CPUs: a bound of 4 tasks.
    let mut ctrl = NodeController::new(0, 1, 2, &cfg);
    ctrl.seed(
        &[
            (0, 1.0),
            (5, 2.0),
            (1, f64::NAN),
            (2, f64::INFINITY),
            (1, 1.1),
        ],
        None,
        99,
    );
    assert_eq!(ctrl.threshold(), 4);
    let state = ctrl.export();
    assert_eq!(state.observed.len(), 1, "{state:?}");
    assert_eq!(state.observed[0].n, 1);
    assert_eq!(state.numa.ewma, None);
}
