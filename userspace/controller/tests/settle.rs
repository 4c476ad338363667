//! The controller against a simulated node whose balance point is known: it must find
//! it from either end, with and without noise, and then stay there.

mod common;

use common::*;
use esn_controller::{ControllerConfig, Decision, NodeController};

/// Intervals within which the threshold must have reached the balance point for good.
const SETTLE_BOUND: usize = 150;
/// Intervals watched after settling.
const WATCH: usize = 200;
/// Most changes of the learned threshold while watched: one excursion and back.
const MAX_CHANGES: usize = 2;
/// Noise sequences tried per noisy scenario, so that passing is not the luck of one.
const SEEDS: u64 = 20;

struct Outcome {
    settled_at: usize,
    changes_after: usize,
    final_threshold: u32,
}

fn scenario(p_numa: f64, start: u32, noise: f64) -> Outcome {
    let seeds = if noise > 0.0 { SEEDS } else { 1 };
    let outcomes: Vec<Outcome> = (0..seeds)
        .map(|seed| one_run(p_numa, start, noise, seed))
        .collect();
    let worst = outcomes.iter().map(|o| o.settled_at).max().unwrap();
    let mut settle: Vec<usize> = outcomes.iter().map(|o| o.settled_at).collect();
    settle.sort();
    println!(
        "P_numa {p_numa}, start {start}, noise {noise}: over {seeds} run(s) settled at \
         interval {} (median) / {worst} (worst), at most {} changes in the next {WATCH}, \
         final thresholds {:?}",
        settle[settle.len() / 2],
        outcomes.iter().map(|o| o.changes_after).max().unwrap(),
        outcomes
            .iter()
            .map(|o| o.final_threshold)
            .collect::<std::collections::BTreeSet<_>>(),
    );
    outcomes
        .into_iter()
        .max_by_key(|o| (o.settled_at, o.changes_after))
        .unwrap()
}

fn one_run(p_numa: f64, start: u32, noise: f64, seed: u64) -> Outcome {
    let target = analytic_threshold(SHAPE, p_numa);
    let mut sim = SimNode::with_seed(p_numa, noise, seed);
    let mut ctrl = NodeController::new(0, start, DEMAND, &ControllerConfig::default());
    let decisions: Vec<Decision> = run(&mut ctrl, &mut sim, SETTLE_BOUND + WATCH);
    let (first, watched) = decisions.split_at(SETTLE_BOUND);

    let label = format!("P_numa {p_numa}, start {start}, noise {noise}, seed {seed}");
    let trace: Vec<u32> = decisions.iter().map(learned).collect();
    let settled_at = settled_at(first, target)
        .unwrap_or_else(|| panic!("{label}: not at {target} after {SETTLE_BOUND}: {trace:?}"));
    let changes_after = changes(watched);
    assert!(
        changes_after <= MAX_CHANGES,
        "{label}: {changes_after} changes after settling: {trace:?}"
    );
    for d in watched {
        assert!(
            learned(d).abs_diff(target) <= 1,
            "{label}: strayed to {} from {target}: {trace:?}",
            learned(d)
        );
    }
    let final_threshold = learned(decisions.last().unwrap());
    Outcome {
        settled_at,
        changes_after,
        final_threshold,
    }
}

#[test]
fn analytic_balance_points() {
    // P_cont(n) = 0.02 n² + 0.05 n + 1: P(2) = 1.18 ≤ 1.3 < P(3) = 1.33, and
    // P(8) = 2.68 ≤ 3.0 < P(9) = 3.07.
    assert_eq!(analytic_threshold(SHAPE, 1.3), 2);
    assert_eq!(analytic_threshold(SHAPE, 3.0), 8);
    assert!((p_cont(SHAPE, 1) - 1.07).abs() < 1e-12);
}

#[test]
fn settles_on_two_for_the_prior_penalty() {
    for start in [1, DEMAND] {
        for noise in [0.0, 0.05] {
            let o = scenario(1.3, start, noise);
            assert_eq!(o.final_threshold, 2);
        }
    }
}

#[test]
fn settles_on_eight_for_a_threefold_penalty() {
    // Exactly 8, not 8 ± 1: P(9) is 2.3 % over the penalty, and the fit resolves that
    // with ±5 % noise because it pools every interval at 8 with the explorations at 9.
    for start in [1, DEMAND] {
        for noise in [0.0, 0.05] {
            let o = scenario(3.0, start, noise);
            assert_eq!(o.final_threshold, 8);
        }
    }
}

#[test]
fn noiseless_runs_settle_without_a_single_change_afterwards() {
    for (p_numa, start) in [(1.3, 1), (1.3, DEMAND), (3.0, 1), (3.0, DEMAND)] {
        let o = scenario(p_numa, start, 0.0);
        assert_eq!(o.changes_after, 0);
        assert!(o.settled_at <= 60, "settled at {}", o.settled_at);
    }
}

#[test]
fn a_node_without_contention_keeps_every_task() {
    let mut sim = SimNode::new(1.3, 0.0);
    sim.curve = [0.0, 0.0, 1.0];
    let mut ctrl = NodeController::new(0, 1, DEMAND, &ControllerConfig::default());
    let decisions = run(&mut ctrl, &mut sim, 300);
    // Every task placed from some interval on, and the threshold never below
    // the demand after it (above it is harmless: no task is there to take it).
    let at = decisions
        .iter()
        .rposition(|d| d.placed < DEMAND || learned(d) < DEMAND)
        .map_or(0, |i| i + 1);
    let trace: Vec<u32> = decisions.iter().map(learned).collect();
    println!("no contention: every task kept from interval {at}");
    assert!(at <= 150, "{at}: {trace:?}");
}

#[test]
fn follows_a_change_of_the_numa_penalty() {
    for (before, after) in [(1.3, 3.0), (3.0, 1.3)] {
        let mut sim = SimNode::new(before, 0.05);
        let mut ctrl = NodeController::new(0, 1, DEMAND, &ControllerConfig::default());
        run(&mut ctrl, &mut sim, 300);
        assert_eq!(ctrl.threshold(), analytic_threshold(SHAPE, before));

        sim.p_numa = after;
        let decisions = run(&mut ctrl, &mut sim, 300);
        let target = analytic_threshold(SHAPE, after);
        let at = settled_at(&decisions, target).expect("never settled after the change");
        assert!(at <= 100, "{before} -> {after}: settled at {at}");
    }
}

#[test]
fn follows_a_change_of_the_contention_curve() {
    // Four times the curvature: at P_numa 3, 0.08 n² + 0.05 n + 1 crosses 3 at 4.7.
    let steeper = [0.08, 0.05, 1.0];
    assert_eq!(analytic_threshold(steeper, 3.0), 4);
    let mut sim = SimNode::new(3.0, 0.05);
    let mut ctrl = NodeController::new(0, DEMAND, DEMAND, &ControllerConfig::default());
    run(&mut ctrl, &mut sim, 300);
    assert_eq!(ctrl.threshold(), 8);

    sim.curve = steeper;
    let decisions = run(&mut ctrl, &mut sim, 300);
    let at = settled_at(&decisions, 4).expect("never settled after the change");
    assert!(at <= 100, "settled at {at}");
}

#[test]
fn explores_one_above_on_a_fixed_rhythm() {
    let cfg = ControllerConfig::default();
    let mut sim = SimNode::new(3.0, 0.0);
    let mut ctrl = NodeController::new(0, DEMAND, DEMAND, &cfg);
    let decisions = run(&mut ctrl, &mut sim, 400);
    let explored: Vec<usize> = (0..decisions.len())
        .filter(|&i| decisions[i].exploring)
        .collect();
    assert!(explored.len() >= 10, "{explored:?}");
    for &i in &explored {
        let d = &decisions[i];
        assert_eq!(d.threshold, learned(d) + 1);
        // The next interval runs at the explored value and feeds the fit.
        if let Some(next) = decisions.get(i + 1) {
            assert_eq!(next.placed, d.threshold);
            assert!(next.p_cont.is_some());
        }
    }
    for w in explored.windows(2) {
        assert!(w[1] - w[0] >= cfg.explore_every as usize, "{explored:?}");
    }
}

#[test]
fn no_exploration_without_demand() {
    // Four tasks want the node and the threshold is 8: nothing is learned by
    // allowing a ninth.
    let mut sim = SimNode::new(3.0, 0.0);
    sim.demand = 4;
    let mut ctrl = NodeController::new(0, 8, 16, &ControllerConfig::default());
    for d in run(&mut ctrl, &mut sim, 300) {
        assert!(!d.exploring);
        assert_eq!(d.placed, 4);
    }
}

#[test]
fn exploration_can_be_switched_off() {
    let cfg = ControllerConfig {
        explore_every: 0,
        ..ControllerConfig::default()
    };
    let mut sim = SimNode::new(3.0, 0.0);
    let mut ctrl = NodeController::new(0, 1, DEMAND, &cfg);
    let decisions = run(&mut ctrl, &mut sim, 300);
    assert!(decisions.iter().all(|d| !d.exploring));
    // Without ever seeing n = 2 the controller has no evidence to grow on.
    assert!(decisions.iter().all(|d| d.threshold == 1));
}

#[test]
fn heavy_noise_costs_at_most_rare_excursions_of_one() {
    // ±10 % noise is more than four times the 2.3 % by which the first n past the
    // balance point exceeds P_numa, so the fit sometimes puts that n within P_numa
    // for a while and the threshold makes an excursion to it. What must not happen is
    // straying further, or flapping over it on every noisy exploration: over 1000
    // intervals a run averages about one excursion (two changes) in 200 runs tried
    // while writing this, and never more than six.
    for p_numa in [1.3, 3.0] {
        for start in [1, DEMAND] {
            let target = analytic_threshold(SHAPE, p_numa);
            let mut total = 0;
            for seed in 0..SEEDS {
                let mut sim = SimNode::with_seed(p_numa, 0.10, seed);
                let mut ctrl = NodeController::new(0, start, DEMAND, &ControllerConfig::default());
                let decisions = run(&mut ctrl, &mut sim, SETTLE_BOUND + 1000);
                let watched = &decisions[SETTLE_BOUND..];
                let trace: Vec<u32> = watched.iter().map(learned).collect();
                assert!(
                    trace.iter().all(|t| t.abs_diff(target) <= 1),
                    "P_numa {p_numa}, start {start}, seed {seed}: {trace:?}"
                );
                let n = changes(watched);
                assert!(
                    n <= 12,
                    "P_numa {p_numa}, start {start}, seed {seed}: {n} changes"
                );
                total += n;
            }
            println!(
                "P_numa {p_numa}, start {start}, noise 0.1: {total} changes in {SEEDS} × 1000 \
                 intervals"
            );
            assert!(
                total <= 3 * SEEDS as usize,
                "P_numa {p_numa}, start {start}: {total}"
            );
        }
    }
}

/// Tasks that mostly wait for their device, and a remote penalty far above their
/// contention: from one task, each next one is explored after one quiet
/// interval and kept at once, instead of one per `explore_every` plus
/// `confirm_intervals`. The bound (8) is above the demand (4), and P_cont(4)
/// 2.44 still sits more than 15 % under P_numa 3.0 (P_cont(5) would be 3.25):
/// once every task is home no request comes from elsewhere, and only that
/// keeps the explorations of 5 at the slow rhythm.
#[test]
fn headroom_climbs_in_a_few_intervals_per_task() {
    let cfg = ControllerConfig::default();
    let mut sim = SimNode::new(3.0, 0.0);
    sim.demand = 4;
    sim.curve = [0.09, 0.0, 1.0];
    let mut ctrl = NodeController::new(0, 1, 4, &cfg);
    let decisions = run(&mut ctrl, &mut sim, 60);
    let trace: Vec<u32> = decisions.iter().map(learned).collect();
    let at = settled_at(&decisions, 4).unwrap_or_else(|| panic!("not at 4: {trace:?}"));
    // Three steps of 1 quiet interval, 1 exploring (measured and kept), after the first.
    assert!(at <= 8, "at 4 from interval {at}: {trace:?}");
    let explored = decisions[at..].iter().filter(|d| d.exploring).count();
    assert!(
        (1..=60usize.div_ceil(cfg.explore_every as usize)).contains(&explored),
        "{explored} explorations at 4: {trace:?}"
    );
}

/// No headroom: the rhythm stays `explore_every`, and an exploration that
/// measured above what a spill costs is not kept.
#[test]
fn without_headroom_the_climb_keeps_its_rhythm() {
    let cfg = ControllerConfig::default();
    let mut sim = SimNode::new(1.3, 0.0);
    sim.demand = 4;
    // P_cont(1) 1.2 > 0.85 x 1.3; P_cont(2) 1.4 > 1.3.
    sim.curve = [0.0, 0.2, 1.0];
    let mut ctrl = NodeController::new(0, 1, 2, &cfg);
    let decisions = run(&mut ctrl, &mut sim, 100);
    let trace: Vec<u32> = decisions.iter().map(learned).collect();
    assert!(trace.iter().all(|&t| t == 1), "{trace:?}");
    let explored: Vec<usize> = (0..decisions.len())
        .filter(|&i| decisions[i].exploring)
        .collect();
    assert!(!explored.is_empty(), "never explored");
    for w in explored.windows(2) {
        assert!(w[1] - w[0] >= cfg.explore_every as usize, "{explored:?}");
    }
}
