//! Learns, live, how many I/O-bound tasks each NUMA node should keep next to its
//! NVMe devices before spilling the rest to the nearest node.
//!
//! No BPF and no sysfs here. [`live::Control`], the controller's loop in the
//! scheduler, turns the cumulative readings the binary takes from BPF (I/O
//! counters, [`NodeWaits`]) into one [`NodeSample`] per node hosting devices each
//! control interval, calls [`NodeController::step`], and returns the decisions
//! whose [`Decision::threshold`] the binary writes into the BPF map. The model
//! below is pure logic; the only I/O is the state file ([`persist`], and
//! `live`'s lock, load and save, on a path the caller gives) and `live`'s clock.
//!
//! # The model: the lesser evil
//!
//! A task placed on its device's node pays CPU contention: the more I/O-bound tasks
//! share the node, the longer each waits to run before it can submit its next
//! request. A task spilled to another node pays the interconnect on every request.
//! Both are expressed as a factor on one request's round trip:
//!
//! * **P_numa** = remote device latency / local device latency, per interval with
//!   `min_samples` requests on both sides, averaged (EWMA) and clamped to [1, 10].
//!   Before any measurement it is the prior (1.3); a configured override replaces it.
//! * **P_cont(n)** = 1 + run delay / local device latency, observed with n tasks
//!   placed: how much a placed task's request cycle stretches because it waits for a
//!   CPU. The run delay is the wait beyond an uncontended wake-up's (one that went
//!   straight to an idle CPU, [`NodeWaits::io_contended_mean_ns`]): a task spilled
//!   to another node pays that much too, so it is no reason to spill. It grows with
//!   n, and faster than linearly once the node's CPUs fill up, so
//!   the controller fits a quadratic a·n² + b·n + c to the observed (n, P_cont)
//!   points by recursive least squares with forgetting (`fit.rs`).
//!
//! * **Spill contention**: a spilled task also waits for a CPU on the node it goes to.
//!   The same wait beyond an uncontended wake-up, of the tasks placed on the node
//!   this one spills to first, over the local device latency, averaged like P_numa
//!   (but plainly over its first `1 / alpha` intervals, and no task is shed on it
//!   before those are in: `penalty.rs`);
//!   0 (the next node has a free CPU) until something was placed there. Beside a CPU
//!   hog on every node, spilling only moves a task's wait and adds the interconnect.
//!
//! The threshold n* is the largest n for which the fitted P_cont(n) is still no
//! worse than P_numa + spill contention: beyond it, another task is better off
//! remote. That holds only if the task can go there: while the node it spills to
//! has no free slot ([`NodeSample::spill_room`] 0), a task shed here would run
//! unplaced, on the fair path, with neither locality nor the placed tasks'
//! preemption, and the threshold is not lowered.
//!
//! ```text
//!  P_cont(n)
//!      │                                          ╱  fitted a·n² + b·n + c
//!      │                                       ╱ ·
//!      │                                    ╱ ·
//!  P_numa ┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄┄╳┄┄┄┄┄┄┄┄┄┄┄┄┄┄  remote / local latency
//!      │                           ·  ╱ ·│
//!      │                  ·  · ╱ ·       │
//!    1 ┼ ·  ·  ·  · ── ·                 │
//!      └─┬───────────────────────────────┴──────────────┬──▶ n (tasks placed)
//!        1                               n*             max (2 x the node's CPUs)
//!        ◀─ keep on the device's node ───┤├ spill to the nearest node ─▶
//! ```
//!
//! # The steps of one interval
//!
//! ```text
//!  NodeSample ─▶ sample: enough data? ──no──▶ repeat the last answer, change nothing
//!                  │ yes
//!                  ├─ remote / local ──▶ penalty: EWMA ─────────────────────▶ P_numa
//!                  ├─ next node's wait ─▶ penalty: EWMA ──────────▶ + spill contention
//!                  └─ (n, P_cont) ─────▶ evidence: last 3 points per n ──────┐
//!                                         │ their median: the outlier check │
//!                                         ▼                                 │
//!                                        fit: robust RLS ──▶ curve          │
//!        target: walk the curve from the threshold, if it is usable,        │
//!                else one step on the evidence ◀────────────────────────────┘
//!        stability: hysteresis + rate limit ──▶ threshold
//!        explore_every quiet intervals ──▶ threshold + 1 for one interval
//! ```
//!
//! Why each step is there:
//!
//! * **Outliers.** A point is checked against the median of the last three at its n
//!   (or, for the first ones at an n, against the curve) before it may move the
//!   curve, so one absurd interval moves it about as much as an ordinary noisy one,
//!   while a lasting change passes as soon as it is the median (`fit.rs`).
//! * **Usable curve.** A quadratic needs points at three distinct n, must have finite
//!   coefficients, and must not fall from the lowest to the highest n it has points
//!   for; otherwise the threshold follows direct evidence, one step at a time, and
//!   only on a median that clears P_numa by 5 % either way, so a tie holds it
//!   where it is (`evidence.rs`). That median counts only the points since the
//!   node last came back to n: a start-up interval that made it shed must not
//!   outvote what an exploration measures there 20 intervals later.
//! * **Target.** n* is found by walking from the current threshold, one n at a time,
//!   and each step needs the fitted value to clear P_numa by one standard error of
//!   that value (`target.rs`): a balance point hidden in the noise is not chased,
//!   and an extrapolation far from the data is not trusted.
//! * **Stability.** The target must stay on one side for `confirm_intervals`
//!   intervals before the threshold moves, then it moves at most `max_step` per
//!   interval, always within [`min_threshold`, max] (`stability.rs`).
//! * **Exploration.** The node never holds more than `threshold` tasks, so the curve
//!   above it would never be seen and a threshold that is too low would stay too low.
//!   Every `explore_every` intervals without a move, if the node filled its
//!   threshold, one interval runs at threshold + 1 (`exploring: true`), and what it
//!   measures feeds the fit like any other interval. It is on a counter, not random,
//!   so runs are reproducible. Where the threshold's contention sits more than
//!   `HEADROOM` (15 %) below what a spill costs, one task more was never
//!   measured, and requests still reach the node's devices from other nodes,
//!   the next exploration comes after 1 quiet interval instead, and an
//!   exploration that measures that low is kept at once: a node whose tasks mostly
//!   wait for their device reaches its balance point in seconds.
//! * **Bound.** At most [`LATENCY_TASKS_PER_CPU`] (2) tasks per CPU of the node:
//!   tasks that mostly wait for their device share a CPU at little contention, and
//!   the balance, not the CPU count, says how many.
//! * **Idle.** An interval without enough data (an idle node, a counter reset,
//!   nonsense means) neither moves the threshold nor advances any counter; the last
//!   answer stands, an exploration still waiting for its measurement included.
//!
//! # The other objective: throughput
//!
//! With [`Objective::Throughput`] the threshold is not read off the curve: it is
//! climbed on the throughput of the node's devices, by running single intervals at a
//! neighbouring threshold and keeping what completed more (`climb.rs`). The latency
//! model above keeps measuring (its P_numa, P_cont and curve still show in each
//! [`Decision`]), but does not decide. The bound rises to [`TASKS_PER_CPU`] tasks per
//! CPU: what the latency model cannot see is that a remote submitter may slow the
//! local ones too, and that tasks which mostly wait for their device can share a CPU.
//!
//! # Persistence
//!
//! [`NodeController::export`] and [`NodeController::restore`] turn a controller into
//! a [`NodeState`] and back; [`persist`] stores them for all nodes in one file,
//! atomically, and refuses files from another version or topology.

mod climb;
mod config;
mod controller;
mod decision;
mod evidence;
mod fit;
mod linalg;
pub mod live;
mod penalty;
pub mod persist;
pub mod profile;
mod sample;
mod stability;
mod target;

pub use climb::TASKS_PER_CPU;
pub use config::{ControllerConfig, Objective, NUMA_PENALTY_MAX, NUMA_PENALTY_MIN};
pub use controller::{NodeController, LATENCY_TASKS_PER_CPU};
pub use decision::{decisions_text, Decision};
pub use penalty::PenaltySource;
pub use persist::{load, save, LearnedState, LoadOutcome, NodeState};
pub use sample::{LatencyStat, NodeSample, NodeWaits, CONTENTION_MAX};
