// SPDX-License-Identifier: GPL-2.0-only
//! The histogram bpf/callprof.bpf.c fills, read back: which durations a slot
//! holds and the quantiles of a histogram.
//!
//! ```text
//!   slot s < 32          exactly s ns
//!   slot s = 32e + m     [(32 + m) << (e - 1), (33 + m) << (e - 1)) ns, e >= 1
//! ```
//! so every slot above the first 32 is 1/32 to 1/64 of its value wide. A
//! quantile is interpolated linearly inside the slot it falls in.

/// Slots per power of two, as a shift (CALLPROF_SUB_BITS in the BPF C).
pub const SUB_BITS: u32 = 5;
/// Slots in all (CALLPROF_SLOTS): the map must have exactly this many.
pub const SLOTS: usize = 2048;

/// The slot the BPF side counts a duration of `ns` in (callprof_slot).
#[cfg(test)]
pub fn slot_of(ns: u64) -> usize {
    if ns < 1 << SUB_BITS {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros();
    let sub = (ns >> (msb - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    ((((msb - SUB_BITS + 1) as u64) << SUB_BITS) | sub).min(SLOTS as u64 - 1) as usize
}

/// The durations slot `slot` holds: [low, high) ns.
pub fn slot_bounds(slot: usize) -> (f64, f64) {
    let per_power = 1usize << SUB_BITS;
    if slot < per_power {
        return (slot as f64, slot as f64 + 1.0);
    }
    let power = (slot >> SUB_BITS) as i32;
    let sub = (slot & (per_power - 1)) as f64;
    let width = 2f64.powi(power - 1);
    (
        (per_power as f64 + sub) * width,
        (per_power as f64 + sub + 1.0) * width,
    )
}

/// What one callback's histogram says.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub calls: u64,
    /// The mean of the slots' midpoints (the kernel's bpf stats mean is the
    /// exact one, over a different window).
    pub mean_ns: f64,
    pub p10_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
}

/// The `q` quantile (0 < q < 1) of a histogram of `total` calls.
fn quantile(counts: &[u64], total: u64, q: f64) -> f64 {
    let rank = q * total as f64;
    let mut below = 0u64;
    for (slot, &count) in counts.iter().enumerate() {
        if count == 0 {
            continue;
        }
        if (below + count) as f64 >= rank {
            let (low, high) = slot_bounds(slot);
            return low + (high - low) * ((rank - below as f64) / count as f64);
        }
        below += count;
    }
    counts
        .iter()
        .rposition(|&c| c > 0)
        .map_or(0.0, |slot| slot_bounds(slot).1)
}

/// The summary of a histogram, None when it counted no call.
pub fn summarize(counts: &[u64]) -> Option<Summary> {
    let calls: u64 = counts.iter().sum();
    if calls == 0 {
        return None;
    }
    let weighted: f64 = counts
        .iter()
        .enumerate()
        .map(|(slot, &count)| {
            let (low, high) = slot_bounds(slot);
            count as f64 * (low + high) / 2.0
        })
        .sum();
    Some(Summary {
        calls,
        mean_ns: weighted / calls as f64,
        p10_ns: quantile(counts, calls, 0.10),
        p50_ns: quantile(counts, calls, 0.50),
        p90_ns: quantile(counts, calls, 0.90),
        p99_ns: quantile(counts, calls, 0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duration_lies_in_its_slot() {
        let mut ns = 0u64;
        while ns < 1 << 40 {
            let (low, high) = slot_bounds(slot_of(ns));
            assert!(
                low <= ns as f64 && (ns as f64) < high,
                "{ns} not in [{low}, {high})"
            );
            ns = ns * 9 / 8 + 1;
        }
    }

    #[test]
    fn slots_are_contiguous_and_narrow() {
        for slot in 1..SLOTS {
            let (low, _) = slot_bounds(slot);
            let (_, prev_high) = slot_bounds(slot - 1);
            assert_eq!(low, prev_high, "gap before slot {slot}");
            let (low, high) = slot_bounds(slot);
            if slot >= 32 {
                assert!(
                    (high - low) / low <= 1.0 / 32.0 + 1e-12,
                    "slot {slot} too wide"
                );
            }
        }
        // The largest u64 still lands in a slot the map has.
        assert!(slot_of(u64::MAX) < SLOTS);
    }

    fn histogram(durations: &[u64]) -> Vec<u64> {
        let mut counts = vec![0; SLOTS];
        for &ns in durations {
            counts[slot_of(ns)] += 1;
        }
        counts
    }

    #[test]
    fn the_median_ignores_a_few_huge_calls() {
        // 98 calls of 2-3 µs, two that a 100 ms vCPU turn landed in.
        let mut calls: Vec<u64> = (0..98).map(|i| 2000 + 10 * i).collect();
        calls.extend([100_000_000, 120_000_000]);
        let s = summarize(&histogram(&calls)).unwrap();
        assert_eq!(s.calls, 100);
        // The true median is 2490 ns; the slot there is 64 ns wide.
        assert!((s.p50_ns - 2490.0).abs() < 64.0, "{s:?}");
        // The mean is made of the two outliers, as the kernel's would be.
        assert!(s.mean_ns > 2_000_000.0, "{s:?}");
        assert!(s.p99_ns > 50_000_000.0, "{s:?}");
        assert!(s.p10_ns < s.p50_ns && s.p50_ns < s.p90_ns, "{s:?}");
    }

    #[test]
    fn quantiles_of_one_value_stay_in_its_slot() {
        let s = summarize(&histogram(&[5000; 10])).unwrap();
        let (low, high) = slot_bounds(slot_of(5000));
        for q in [s.p10_ns, s.p50_ns, s.p90_ns, s.p99_ns] {
            assert!(low <= q && q <= high, "{q} outside [{low}, {high}]");
        }
    }

    #[test]
    fn an_empty_histogram_has_no_summary() {
        assert_eq!(summarize(&vec![0; SLOTS]), None);
    }
}
