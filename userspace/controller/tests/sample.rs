//! The two ratios read from a sample, when a sample has none, and the wait the
//! contention ratio is read from.

use esn_controller::{LatencyStat, NodeSample, NodeWaits, CONTENTION_MAX};

fn sample(placed: u32, local: (u64, f64), remote: (u64, f64), delay: (u64, f64)) -> NodeSample {
    NodeSample {
        placed,
        local_lat: LatencyStat::new(local.0, local.1),
        remote_lat: LatencyStat::new(remote.0, remote.1),
        run_delay: LatencyStat::new(delay.0, delay.1),
        spill_delay: LatencyStat::default(),
        elapsed_s: 1.0,
        spill_room: None,
    }
}

#[test]
fn ratios_of_a_good_sample() {
    let s = sample(4, (100, 10_000.0), (100, 13_000.0), (100, 2_500.0));
    assert!((s.numa_ratio(50).unwrap() - 1.3).abs() < 1e-12);
    assert!((s.contention(50).unwrap() - 1.25).abs() < 1e-12);
}

#[test]
fn a_task_that_never_waits_has_no_contention() {
    let s = sample(4, (100, 10_000.0), (0, 0.0), (100, 0.0));
    assert_eq!(s.contention(50), Some(1.0));
    assert_eq!(s.numa_ratio(50), None);
}

#[test]
fn contention_needs_enough_run_delays_but_any_local_latency() {
    let s = sample(4, (1, 10_000.0), (0, 0.0), (50, 5_000.0));
    assert_eq!(s.contention(50), Some(1.5));
    let s = sample(4, (1, 10_000.0), (0, 0.0), (49, 5_000.0));
    assert_eq!(s.contention(50), None);
    let s = sample(4, (0, 10_000.0), (0, 0.0), (100, 5_000.0));
    assert_eq!(s.contention(50), None);
}

#[test]
fn contention_needs_a_placed_task() {
    let s = sample(0, (100, 10_000.0), (0, 0.0), (100, 5_000.0));
    assert_eq!(s.contention(50), None);
}

#[test]
fn broken_means_are_no_data() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -5.0] {
        let s = sample(4, (100, bad), (100, 13_000.0), (100, 2_500.0));
        assert_eq!(s.numa_ratio(50), None, "{bad}");
        assert_eq!(s.contention(50), None, "{bad}");
        let s = sample(4, (100, 10_000.0), (100, bad), (100, bad));
        assert_eq!(s.numa_ratio(50), None, "{bad}");
        assert_eq!(s.contention(50), None, "{bad}");
    }
    // Zero is no latency for a device.
    let s = sample(4, (100, 0.0), (100, 13_000.0), (100, 2_500.0));
    assert_eq!(s.numa_ratio(50), None);
    assert_eq!(s.contention(50), None);
    let s = sample(4, (100, 10_000.0), (100, 0.0), (100, 2_500.0));
    assert_eq!(s.numa_ratio(50), None);
    // Finite but absurd: capped, so one interval cannot drag the fit anywhere.
    let s = sample(4, (100, 1.0), (0, 0.0), (100, 1e200));
    assert_eq!(s.contention(50), Some(CONTENTION_MAX));
    // Finite means whose ratio overflows.
    let s = sample(4, (100, 1e-300), (100, 1e300), (100, 1e300));
    assert_eq!(s.numa_ratio(50), None);
    assert_eq!(s.contention(50), None);
}

#[test]
fn contention_is_the_wait_beyond_an_uncontended_wake_up() {
    let waits = |io: (u64, u64), idle: (u64, u64)| NodeWaits {
        io_waits: io.0,
        io_wait_ns: io.1,
        io_idle_waits: idle.0,
        io_idle_wait_ns: idle.1,
        ..Default::default()
    };
    // Every wake-up found an idle CPU: no contention, however long they took.
    assert_eq!(
        waits((10, 1_500_000), (10, 1_500_000)).io_contended_mean_ns(),
        Some(0.0)
    );
    // 8 of 10 idle at 100 µs, 2 queued at 600 µs: mean 200 µs, 100 µs beyond.
    let w = waits((10, 2_000_000), (8, 800_000));
    assert_eq!(w.io_idle_mean_ns(), Some(100_000.0));
    assert_eq!(w.io_contended_mean_ns(), Some(100_000.0));
    // None found an idle CPU: the whole mean, as it was before the split.
    assert_eq!(
        waits((4, 400_000), (0, 0)).io_contended_mean_ns(),
        Some(100_000.0)
    );
    // Idle wake-ups slower than the mean (a torn read): never below zero.
    assert_eq!(
        waits((4, 400), (4, 4_000)).io_contended_mean_ns(),
        Some(0.0)
    );
    // No waits at all: no data.
    assert_eq!(waits((0, 0), (0, 0)).io_contended_mean_ns(), None);
    // The interval's share, as the other counters: saturating.
    let d = waits((10, 2_000_000), (8, 800_000)).delta(&waits((4, 500_000), (9, 900_000)));
    assert_eq!((d.io_idle_waits, d.io_idle_wait_ns), (0, 0));
}

#[test]
fn summing_and_differencing_waits_keeps_every_field() {
    // Distinct values in every field, through serde so that a field added to the
    // struct and forgotten in merge() or delta() fails here.
    let one: NodeWaits = serde_json::from_value(serde_json::json!({
        "io_waits": 1, "io_wait_ns": 2, "fair_waits": 3, "fair_wait_ns": 4,
        "io_idle_waits": 5, "io_idle_wait_ns": 6
    }))
    .unwrap();
    let fields = serde_json::to_value(one)
        .unwrap()
        .as_object()
        .unwrap()
        .len();
    assert_eq!(fields, 6, "a new NodeWaits field: add it to this test");
    let mut sum = one;
    sum.merge(&one);
    let doubled = serde_json::to_value(sum).unwrap();
    for (name, v) in serde_json::to_value(one).unwrap().as_object().unwrap() {
        assert_eq!(
            doubled[name],
            v.as_u64().unwrap() * 2,
            "merge() drops {name}"
        );
    }
    assert_eq!(sum.delta(&one), one, "delta() drops a field");
    // A counter that went backwards (a reset) reads as no waits, in every field.
    assert_eq!(
        one.delta(&sum),
        NodeWaits::default(),
        "delta() does not saturate"
    );
}

#[test]
fn spill_contention_is_the_next_nodes_wait_over_local_latency() {
    let mut s = sample(2, (100, 10_000.0), (100, 13_000.0), (100, 2_500.0));
    // Nothing placed where this node spills to: nothing known, whatever else is.
    assert_eq!(s.spill_contention(50), None);
    s.spill_delay = LatencyStat::new(100, 5_000.0);
    assert_eq!(s.spill_contention(50), Some(0.5));
    // It needs enough waits there, any local latency, and sane means.
    assert_eq!(s.spill_contention(101), None);
    s.local_lat = LatencyStat::new(1, 10_000.0);
    assert_eq!(s.spill_contention(50), Some(0.5));
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        s.spill_delay = LatencyStat::new(100, bad);
        assert_eq!(s.spill_contention(50), None, "{bad}");
    }
    // Absurd but finite: capped like P_cont.
    s.spill_delay = LatencyStat::new(100, 1e12);
    assert_eq!(s.spill_contention(50), Some(CONTENTION_MAX));
    // It does not depend on tasks placed on this node.
    s.placed = 0;
    assert_eq!(s.spill_contention(50), Some(CONTENTION_MAX));
}
