//! Log2 latency histograms, the layout BPF fills.
//!
//! Slot 0 counts [0, 2) ns and slot i (i >= 1) counts [2^i, 2^(i+1)) ns; the last
//! slot also takes everything longer. In other words a sample goes to
//! floor(log2(ns)) clamped to `LAT_SLOTS - 1`, with 0 and 1 both in slot 0. BPF
//! computes the same rule with a bit scan, which is why it is a power-of-two layout:
//! resolution is a factor of two, and a percentile is an estimate within its bucket.

/// Buckets per histogram; the last starts at 2^39 ns, about nine minutes.
pub const LAT_SLOTS: usize = 40;

/// The bucket of a sample of `ns` nanoseconds.
pub fn slot_of(ns: u64) -> usize {
    if ns < 2 {
        return 0;
    }
    let log2 = (u64::BITS - 1 - ns.leading_zeros()) as usize;
    log2.min(LAT_SLOTS - 1)
}

/// Lower bound of `slot` in ns (0 for slot 0, else 2^slot). Slots past the end are
/// clamped to the last one.
pub fn slot_lower_ns(slot: usize) -> u64 {
    match slot.min(LAT_SLOTS - 1) {
        0 => 0,
        s => 1 << s,
    }
}

/// Upper bound (exclusive) of `slot` in ns; `None` for the last slot, which has
/// none.
pub fn slot_upper_ns(slot: usize) -> Option<u64> {
    (slot < LAT_SLOTS - 1).then(|| 1 << (slot + 1))
}

/// One histogram with its sample count and sum.
///
/// `count` and `sum_ns` are kept by BPF next to the slots; a snapshot read while BPF
/// updates may see `count` and the slots' total differ by a few. Percentiles use the
/// slots, the mean uses `count` and `sum_ns`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatHist {
    pub slots: [u64; LAT_SLOTS],
    pub count: u64,
    pub sum_ns: u64,
}

// Arrays only implement Default up to 32 elements.
impl Default for LatHist {
    fn default() -> LatHist {
        LatHist {
            slots: [0; LAT_SLOTS],
            count: 0,
            sum_ns: 0,
        }
    }
}

impl LatHist {
    /// Adds one sample, as BPF does; for tests and tools.
    pub fn record(&mut self, ns: u64) {
        let slot = &mut self.slots[slot_of(ns)];
        *slot = slot.saturating_add(1);
        self.count = self.count.saturating_add(1);
        self.sum_ns = self.sum_ns.saturating_add(ns);
    }

    /// True when some field is below `earlier`'s, which a cumulative histogram only
    /// does when it was reset (its map entry deleted and created again).
    pub fn is_reset_since(&self, earlier: &LatHist) -> bool {
        self.count < earlier.count
            || self.sum_ns < earlier.sum_ns
            || self.slots.iter().zip(&earlier.slots).any(|(c, e)| c < e)
    }

    /// The samples added since `earlier`. After a reset ([`LatHist::is_reset_since`])
    /// everything now in the histogram is new, so the delta is all of it: never a
    /// wrapped-around subtraction.
    pub fn delta(&self, earlier: &LatHist) -> LatHist {
        if self.is_reset_since(earlier) {
            return self.clone();
        }
        let mut slots = [0; LAT_SLOTS];
        for (d, (c, e)) in slots.iter_mut().zip(self.slots.iter().zip(&earlier.slots)) {
            *d = c.saturating_sub(*e);
        }
        LatHist {
            slots,
            count: self.count.saturating_sub(earlier.count),
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
        }
    }

    pub fn merge(&mut self, other: &LatHist) {
        for (s, o) in self.slots.iter_mut().zip(&other.slots) {
            *s = s.saturating_add(*o);
        }
        self.count = self.count.saturating_add(other.count);
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
    }

    /// Samples in the slots.
    pub fn total(&self) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |acc, &n| acc.saturating_add(n))
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0 && self.count == 0
    }

    /// Exact mean (from the sum, not the buckets); `None` without samples.
    pub fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }

    /// Estimated `q`-quantile in ns (`q` = 0.99 for p99), `None` without samples or
    /// for a NaN `q`; `q` outside [0, 1] is clamped.
    ///
    /// The sample of rank `q * total` is placed by assuming the samples of its
    /// bucket are spread evenly over the bucket's range, so the estimate moves
    /// smoothly with `q` instead of jumping between powers of two. The last bucket
    /// has no upper bound to spread over and gives its lower bound: an honest
    /// "at least". The result never decreases as `q` grows.
    pub fn percentile_ns(&self, q: f64) -> Option<f64> {
        if q.is_nan() {
            return None;
        }
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let last_used = self.slots.iter().rposition(|&n| n > 0)?;
        let mut before = 0u64;
        for (slot, &n) in self.slots.iter().enumerate().take(last_used + 1) {
            if n == 0 {
                continue;
            }
            let through = before.saturating_add(n);
            // The last used bucket also catches a rank that rounding put just past
            // the end.
            if through as f64 >= rank || slot == last_used {
                let lo = slot_lower_ns(slot) as f64;
                let Some(hi) = slot_upper_ns(slot) else {
                    return Some(lo);
                };
                let frac = ((rank - before as f64) / n as f64).clamp(0.0, 1.0);
                return Some(lo + (hi as f64 - lo) * frac);
            }
            before = through;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_tile_the_range() {
        assert_eq!(slot_lower_ns(0), 0);
        assert_eq!(slot_upper_ns(0), Some(2));
        for s in 1..LAT_SLOTS - 1 {
            assert_eq!(slot_upper_ns(s - 1), Some(slot_lower_ns(s)));
            assert_eq!(slot_of(slot_lower_ns(s)), s);
            assert_eq!(slot_of(slot_upper_ns(s).unwrap() - 1), s);
        }
        assert_eq!(slot_upper_ns(LAT_SLOTS - 1), None);
        assert_eq!(slot_lower_ns(LAT_SLOTS + 5), 1 << (LAT_SLOTS - 1));
    }

    #[test]
    fn last_slot_percentile_is_its_lower_bound() {
        let mut h = LatHist::default();
        h.record(u64::MAX);
        let lo = (1u64 << (LAT_SLOTS - 1)) as f64;
        assert_eq!(h.percentile_ns(0.5), Some(lo));
        assert_eq!(h.percentile_ns(1.0), Some(lo));
    }
}
