//! The histogram layout shared with BPF, and the percentile estimate over it.

use esn_stats::hist::{slot_lower_ns, slot_upper_ns};
use esn_stats::{slot_of, LatHist, LAT_SLOTS};

/// Numerical Recipes' 64-bit LCG: deterministic without a rand crate. The high bits
/// are the good ones.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn hist_of(samples: &[u64]) -> LatHist {
    let mut h = LatHist::default();
    for &ns in samples {
        h.record(ns);
    }
    h
}

#[test]
fn slot_of_boundaries() {
    assert_eq!(slot_of(0), 0);
    assert_eq!(slot_of(1), 0);
    assert_eq!(slot_of(2), 1);
    assert_eq!(slot_of(3), 1);
    assert_eq!(slot_of(4), 2);
    assert_eq!(slot_of(7), 2);
    assert_eq!(slot_of(8), 3);
    assert_eq!(slot_of(1023), 9);
    assert_eq!(slot_of(1024), 10);
    assert_eq!(slot_of((1 << 39) - 1), 38);
    assert_eq!(slot_of(1 << 39), LAT_SLOTS - 1);
    assert_eq!(slot_of(1 << 50), LAT_SLOTS - 1);
    assert_eq!(slot_of(u64::MAX), LAT_SLOTS - 1);
}

#[test]
fn slot_of_is_floor_log2_for_every_power() {
    for i in 1..64u32 {
        let p = 1u64 << i;
        let want = (i as usize).min(LAT_SLOTS - 1);
        assert_eq!(slot_of(p), want, "2^{i}");
        assert_eq!(
            slot_of(p - 1),
            (i as usize - 1).min(LAT_SLOTS - 1),
            "2^{i}-1"
        );
    }
}

#[test]
fn record_counts_and_sums() {
    let h = hist_of(&[0, 1, 5, 1000]);
    assert_eq!(h.count, 4);
    assert_eq!(h.sum_ns, 1006);
    assert_eq!(h.total(), 4);
    assert_eq!(h.slots[0], 2);
    assert_eq!(h.slots[2], 1);
    assert_eq!(h.slots[9], 1);
    assert_eq!(h.mean_ns(), Some(251.5));
}

#[test]
fn empty_histogram_has_no_statistics() {
    let h = LatHist::default();
    assert_eq!(h.total(), 0);
    assert_eq!(h.mean_ns(), None);
    assert_eq!(h.percentile_ns(0.0), None);
    assert_eq!(h.percentile_ns(0.5), None);
    assert_eq!(h.percentile_ns(1.0), None);
}

#[test]
fn nan_quantile_is_none_and_out_of_range_clamps() {
    let h = hist_of(&[100, 200, 5000]);
    assert_eq!(h.percentile_ns(f64::NAN), None);
    assert_eq!(h.percentile_ns(-3.0), h.percentile_ns(0.0));
    assert_eq!(h.percentile_ns(f64::NEG_INFINITY), h.percentile_ns(0.0));
    assert_eq!(h.percentile_ns(7.0), h.percentile_ns(1.0));
    assert_eq!(h.percentile_ns(f64::INFINITY), h.percentile_ns(1.0));
}

#[test]
fn one_bucket_stays_inside_its_bounds() {
    // Every sample in [1024, 2048).
    let h = hist_of(&[1500; 1000]);
    for q in [0.0, 0.01, 0.5, 0.9, 0.99, 1.0] {
        let p = h.percentile_ns(q).unwrap();
        assert!((1024.0..=2048.0).contains(&p), "q={q}: {p}");
    }
    let p50 = h.percentile_ns(0.5).unwrap();
    assert!(
        (p50 - 1536.0).abs() < 1e-9,
        "midpoint of the bucket, got {p50}"
    );
    // Slot 0 is [0, 2).
    let zeros = hist_of(&[0; 10]);
    let p = zeros.percentile_ns(0.5).unwrap();
    assert!((0.0..=2.0).contains(&p), "{p}");
}

#[test]
fn two_buckets_half_and_half() {
    // 100 samples in [1024, 2048), 100 in [8192, 16384).
    let mut samples = vec![1100; 100];
    samples.extend([10_000; 100]);
    let h = hist_of(&samples);
    let p50 = h.percentile_ns(0.5).unwrap();
    // Rank 100 is the last sample of the lower bucket: its upper edge.
    assert!(
        (1024.0..=2048.0).contains(&p50) && p50 > 1900.0,
        "p50 should sit at the top of the lower bucket, got {p50}"
    );
    let p99 = h.percentile_ns(0.99).unwrap();
    assert!((8192.0..16384.0).contains(&p99), "p99 {p99}");
    let p51 = h.percentile_ns(0.51).unwrap();
    assert!((8192.0..16384.0).contains(&p51), "p51 {p51}");
}

#[test]
fn last_bucket_gives_its_lower_bound() {
    let mut samples = vec![1000; 50];
    samples.extend([u64::MAX; 50]);
    let h = hist_of(&samples);
    let last_lo = slot_lower_ns(LAT_SLOTS - 1) as f64;
    assert_eq!(h.percentile_ns(0.99), Some(last_lo));
    assert_eq!(h.percentile_ns(1.0), Some(last_lo));
    assert!(h.percentile_ns(0.5).unwrap() < last_lo);
}

#[test]
fn percentile_never_decreases_with_q() {
    let mut rng = Lcg(0x5eed);
    for round in 0..300 {
        let mut h = LatHist::default();
        // Sparse or dense, small or huge counts, sometimes the last slot.
        let used = 1 + rng.below(LAT_SLOTS as u64) as usize;
        for _ in 0..used {
            let slot = rng.below(LAT_SLOTS as u64) as usize;
            let n = match rng.below(4) {
                0 => 1,
                1 => rng.below(10) + 1,
                2 => rng.below(1_000_000) + 1,
                _ => rng.below(1 << 30) << 20,
            };
            h.slots[slot] = h.slots[slot].saturating_add(n);
        }
        h.count = h.total();
        let mut last = f64::NEG_INFINITY;
        for step in 0..=100 {
            let q = step as f64 / 100.0;
            let Some(p) = h.percentile_ns(q) else {
                assert_eq!(h.total(), 0);
                continue;
            };
            assert!(p.is_finite(), "round {round} q={q}");
            assert!(p >= last, "round {round}: p({q}) = {p} < {last}");
            last = p;
        }
        if let (Some(p50), Some(p99)) = (h.percentile_ns(0.5), h.percentile_ns(0.99)) {
            assert!(p50 <= p99);
        }
    }
}

#[test]
fn percentile_matches_true_quantile_within_a_bucket() {
    // The estimate is only as good as a log2 bucket: within a factor of two of the
    // exact sample quantile.
    let mut rng = Lcg(42);
    let mut samples: Vec<u64> = (0..5000).map(|_| 1000 + rng.below(5_000_000)).collect();
    let h = hist_of(&samples);
    samples.sort_unstable();
    for q in [0.1, 0.5, 0.9, 0.99] {
        let exact = samples[((q * samples.len() as f64) as usize).min(samples.len() - 1)] as f64;
        let est = h.percentile_ns(q).unwrap();
        assert!(
            est >= exact / 2.0 && est <= exact * 2.0,
            "q={q}: estimate {est}, exact {exact}"
        );
    }
}

#[test]
fn delta_subtracts_each_field() {
    let earlier = hist_of(&[10, 20, 3000]);
    let mut later = earlier.clone();
    later.record(25);
    later.record(100_000);
    let d = later.delta(&earlier);
    assert_eq!(d, hist_of(&[25, 100_000]));
    assert_eq!(later.delta(&later), LatHist::default());
}

#[test]
fn delta_after_a_reset_is_everything_now() {
    let earlier = hist_of(&[10, 20, 3000, 3000]);
    // The entry was deleted and recreated: one slot went back.
    let now = hist_of(&[10, 20, 70]);
    assert_eq!(now.delta(&earlier), now);
    for (i, &n) in now.delta(&earlier).slots.iter().enumerate() {
        assert!(n < 1 << 32, "slot {i} wrapped around: {n}");
    }
    // Slots all grew but the count went back: still a reset, never a wrap.
    let mut odd = earlier.clone();
    odd.count = 1;
    let d = odd.delta(&earlier);
    assert_eq!(d, odd);
    assert!(d.count < 1 << 32);
    // The sum went back.
    let mut odd = earlier.clone();
    odd.sum_ns = 5;
    assert_eq!(odd.delta(&earlier), odd);
}

#[test]
fn merge_adds_and_saturates() {
    let mut a = hist_of(&[1, 100, 100]);
    let b = hist_of(&[100, 1 << 45]);
    a.merge(&b);
    assert_eq!(a, hist_of(&[1, 100, 100, 100, 1 << 45]));
    let mut full = LatHist::default();
    full.slots[3] = u64::MAX;
    full.count = u64::MAX;
    full.sum_ns = u64::MAX;
    full.merge(&hist_of(&[8]));
    assert_eq!(full.slots[3], u64::MAX);
    assert_eq!(full.count, u64::MAX);
    assert_eq!(full.total(), u64::MAX);
}

#[test]
fn bounds_are_what_slot_of_sorts_into() {
    for s in 0..LAT_SLOTS {
        assert_eq!(slot_of(slot_lower_ns(s)), s);
        if let Some(hi) = slot_upper_ns(s) {
            assert_eq!(slot_of(hi - 1), s);
            assert_eq!(slot_of(hi), s + 1);
        }
    }
}
