//! A simulated node for the controller tests.
//!
//! The node has a fixed demand of I/O-bound tasks and places min(threshold, demand)
//! of them. The contention it then shows follows a known quadratic, so the threshold
//! the controller should find can be computed by hand.
//!
//! The research's exact coefficients are not available to us; a = 0.02, b = 0.05,
//! c = 1.0 have its shape: convex, and P_cont(1) ≈ 1.07.

#![allow(dead_code)]

use esn_controller::{Decision, LatencyStat, NodeController, NodeSample};

pub const SHAPE: [f64; 3] = [0.02, 0.05, 1.0];
pub const DEMAND: u32 = 16;
pub const LOCAL_NS: f64 = 10_000.0;
/// Comfortably above the default `min_samples`.
pub const COUNT: u64 = 1_000;

/// Numerical Recipes' 64-bit LCG: deterministic noise without a rand crate.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 11
    }

    /// Uniform in [-1, 1].
    pub fn symmetric(&mut self) -> f64 {
        (self.next_u64() as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

pub fn p_cont(curve: [f64; 3], n: u32) -> f64 {
    let n = f64::from(n);
    curve[0] * n * n + curve[1] * n + curve[2]
}

/// floor of the root of P_cont(n) = p_numa, i.e. the largest n with P_cont(n) ≤
/// p_numa, at least 1.
pub fn analytic_threshold(curve: [f64; 3], p_numa: f64) -> u32 {
    let [a, b, c] = curve;
    let root = (-b + (b * b - 4.0 * a * (c - p_numa)).sqrt()) / (2.0 * a);
    (root.floor() as u32).max(1)
}

pub struct SimNode {
    pub demand: u32,
    pub curve: [f64; 3],
    pub p_numa: f64,
    /// Relative noise on P_cont: ±noise, uniform.
    pub noise: f64,
    pub lcg: Lcg,
}

impl SimNode {
    pub fn new(p_numa: f64, noise: f64) -> SimNode {
        SimNode::with_seed(p_numa, noise, 0)
    }

    /// Another noise sequence for each seed.
    pub fn with_seed(p_numa: f64, noise: f64, seed: u64) -> SimNode {
        SimNode {
            demand: DEMAND,
            curve: SHAPE,
            p_numa,
            noise,
            lcg: Lcg(0x5eed_0e5a ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        }
    }

    /// One interval run with `threshold`.
    pub fn sample(&mut self, threshold: u32) -> NodeSample {
        let n = threshold.min(self.demand);
        let jitter = 1.0 + self.noise * self.lcg.symmetric();
        let p = p_cont(self.curve, n) * jitter;
        NodeSample {
            placed: n,
            local_lat: LatencyStat::new(COUNT, LOCAL_NS),
            // Requests from other nodes only while some task is left there.
            remote_lat: LatencyStat::new(
                if n < self.demand { COUNT } else { 0 },
                self.p_numa * LOCAL_NS,
            ),
            run_delay: LatencyStat::new(if n == 0 { 0 } else { COUNT }, (p - 1.0) * LOCAL_NS),
            spill_delay: LatencyStat::default(),
            elapsed_s: 1.0,
            spill_room: None,
        }
    }
}

/// Runs `intervals` intervals, each sample taken under the previous decision's
/// threshold (the first under the controller's own).
pub fn run(ctrl: &mut NodeController, sim: &mut SimNode, intervals: usize) -> Vec<Decision> {
    let mut in_force = ctrl.threshold();
    (0..intervals)
        .map(|_| {
            let d = ctrl.step(&sim.sample(in_force));
            in_force = d.threshold;
            d
        })
        .collect()
}

/// The learned threshold of a decision, exploration taken out.
pub fn learned(d: &Decision) -> u32 {
    d.threshold - u32::from(d.exploring)
}

/// 1 + index of the last decision whose learned threshold is not `target`, i.e. the
/// interval from which on it stays at `target`; `None` if the last one is not.
pub fn settled_at(decisions: &[Decision], target: u32) -> Option<usize> {
    if learned(decisions.last()?) != target {
        return None;
    }
    Some(
        decisions
            .iter()
            .rposition(|d| learned(d) != target)
            .map_or(0, |i| i + 1),
    )
}

/// Times the learned threshold changed.
pub fn changes(decisions: &[Decision]) -> usize {
    decisions
        .windows(2)
        .filter(|w| learned(&w[0]) != learned(&w[1]))
        .count()
}
