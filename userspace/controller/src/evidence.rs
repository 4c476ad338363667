//! Direct evidence: what P_cont was actually observed at each n, and the cautious
//! rule that steers the threshold while the curve fit cannot.
//!
//! The fit needs points at three distinct n before a quadratic means anything, but a
//! node that starts at threshold 1 only ever sees n = 1 and, when exploring, n = 2:
//! waiting for the fit would leave it there for good. So until the fit is usable the
//! threshold moves one step at a time on what was measured, never on an
//! extrapolation:
//!
//! ```text
//!   observed(t)     > P_numa × (1 + TIE)  →  t − 1   (the current load already costs too much)
//!   observed(t + 1) ≤ P_numa × (1 − TIE)  →  t + 1   (one more task was tried and was cheap enough)
//!   otherwise                             →  t
//! ```
//!
//! [`TIE`] is the rule's margin, the counterpart of the fitted walk's confidence
//! (`target.rs`): where both sides cost about the same (every CPU busy, so a spill
//! waits as long as a task kept home), the medians land a few per cent either side
//! of P_numa from one interval to the next, and without a margin the threshold
//! followed them down, up and down again, moving a task between nodes each time for
//! no gain. Within the margin the threshold stays where it is; the price is the
//! same as the walk's, at most one task off a balance point the noise cannot
//! resolve.
//!
//! Each move or exploration brings points at a new n, so the fit soon takes over.
//! An n's observation is the median of its last [`RECENT`] points, so one outlier
//! interval never decides anything on its own.
//!
//! Those points must describe the load as it is, though. A node that moved away
//! from n and stayed away for more than [`STALE_AFTER`] intervals (an
//! exploration is one interval away) comes back to a different run: the start-up
//! intervals that made it shed (fio's first seconds, a spill cost not yet
//! measured) would otherwise outvote the fresh point for two more visits, each
//! `explore_every` intervals apart, and keep it from ever returning (VM control
//! H: P_cont(2) 1.18, 1.17 at start-up, 1.09 when explored 20 s later, against a
//! rise line of 1.09). So a point at n after such an absence marks n's older
//! points stale: the rule steers on the fresh ones only, while the outlier check
//! and [`Evidence::largest`] still read them all (see [`Evidence::reference`]).
//!
//! The same observations serve the fit twice: their median at an n is what a new
//! point there is checked against before it may move the curve (see `fit.rs`), and
//! the set of n with observations is what "the fit has points at three distinct n"
//! counts, which is why it is cleared together with the fit.

use crate::persist::ObservedPoint;

/// Points kept per n for the median.
pub(crate) const RECENT: usize = 3;

/// How far, relative to P_numa, a median must clear it before the rule moves.
pub(crate) const TIE: f64 = 0.05;

/// Points at other n after which an n's earlier points no longer count: more than
/// an exploration's one interval away, fewer than the `explore_every` intervals
/// before the next exploration could bring a point there.
pub(crate) const STALE_AFTER: u64 = 2 * RECENT as u64;

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Evidence {
    /// Sorted by n, one entry per distinct n.
    points: Vec<ObservedPoint>,
    /// Points recorded so far, at any n: the age of an n's points.
    clock: u64,
}

impl Evidence {
    pub(crate) fn record(&mut self, n: u32, p_cont: f64) {
        self.clock += 1;
        let at = match self.points.binary_search_by_key(&n, |p| p.n) {
            Ok(i) => i,
            Err(i) => {
                self.points.insert(
                    i,
                    ObservedPoint {
                        n,
                        recent: Vec::with_capacity(RECENT),
                        stale: 0,
                        last: self.clock,
                    },
                );
                i
            }
        };
        let point = &mut self.points[at];
        // The clock moved once for this point, and once per point elsewhere.
        let elsewhere = self.clock.saturating_sub(point.last).saturating_sub(1);
        if elsewhere > STALE_AFTER {
            point.stale = point.recent.len();
        }
        if point.recent.len() == RECENT {
            point.recent.remove(0);
            point.stale = point.stale.saturating_sub(1);
        }
        point.recent.push(p_cont);
        point.last = self.clock;
    }

    pub(crate) fn clear(&mut self) {
        self.points.clear();
        self.clock = 0;
    }

    pub(crate) fn distinct_n(&self) -> usize {
        self.points.len()
    }

    /// The largest median over all n: a typical measured value to compare a point
    /// with where nothing else is known.
    pub(crate) fn largest(&self) -> Option<f64> {
        self.points
            .iter()
            .filter_map(|p| median(&p.recent))
            .max_by(f64::total_cmp)
    }

    /// The smallest and the largest n with points.
    pub(crate) fn span(&self) -> Option<(u32, u32)> {
        Some((self.points.first()?.n, self.points.last()?.n))
    }

    /// Median of the recent points at n since the node last came back to it: what
    /// the rule steers on.
    pub(crate) fn at(&self, n: u32) -> Option<f64> {
        let p = self.point(n)?;
        median(&p.recent[p.stale.min(p.recent.len())..])
    }

    /// The median of all [`RECENT`] points at n once there are that many (the
    /// newest included): what that point is compared with to tell an outlier.
    /// With fewer, one outlier could still sway the median. Points from before an
    /// absence count here: they say what is typical at n, and the fit forgets
    /// them at its own pace.
    pub(crate) fn reference(&self, n: u32) -> Option<f64> {
        let p = self.point(n)?;
        (p.recent.len() >= RECENT)
            .then(|| median(&p.recent))
            .flatten()
    }

    fn point(&self, n: u32) -> Option<&ObservedPoint> {
        let i = self.points.binary_search_by_key(&n, |p| p.n).ok()?;
        Some(&self.points[i])
    }

    /// The rule of the module doc, kept within [min, max].
    pub(crate) fn target(&self, current: u32, p_numa: f64, min: u32, max: u32) -> u32 {
        if current > min && self.at(current).is_some_and(|p| p > p_numa * (1.0 + TIE)) {
            return current - 1;
        }
        if current < max
            && self
                .at(current + 1)
                .is_some_and(|p| p <= p_numa * (1.0 - TIE))
        {
            return current + 1;
        }
        current
    }

    pub(crate) fn to_state(&self) -> Vec<ObservedPoint> {
        self.points.clone()
    }

    /// Keeps only well-formed entries of stored state: finite values, at most
    /// [`RECENT`] of them (the newest), n within [1, max], first entry per n. The
    /// clock resumes from the newest stamp, so no stamp is ahead of it. State
    /// from before the stamps were kept has them all 0: every n counts as
    /// recorded at once, none is stale.
    pub(crate) fn from_state(points: &[ObservedPoint], max: u32) -> Evidence {
        let clock = points
            .iter()
            .filter(|p| p.n >= 1 && p.n <= max)
            .map(|p| p.last)
            .max()
            .unwrap_or(0);
        let mut e = Evidence {
            points: Vec::new(),
            clock,
        };
        for p in points {
            if p.n == 0 || p.n > max || e.at(p.n).is_some() {
                continue;
            }
            let skip = p.recent.len().saturating_sub(RECENT);
            let recent: Vec<f64> = p
                .recent
                .iter()
                .skip(skip)
                .copied()
                .filter(|v| v.is_finite())
                .collect();
            if recent.is_empty() {
                continue;
            }
            // Counted from the newest end, where the fresh points are; at
            // least the newest is fresh.
            let fresh = p.recent.len().saturating_sub(p.stale).max(1);
            let stale = recent.len().saturating_sub(fresh);
            let at = e.points.partition_point(|q| q.n < p.n);
            e.points.insert(
                at,
                ObservedPoint {
                    n: p.n,
                    recent,
                    stale,
                    last: p.last,
                },
            );
        }
        e
    }
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    match v.len() {
        0 => None,
        len if len % 2 == 1 => Some(v[mid]),
        _ => Some(0.5 * (v[mid - 1] + v[mid])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_the_last_points_ignores_one_outlier() {
        let mut e = Evidence::default();
        e.record(3, 1.3);
        assert_eq!(e.at(3), Some(1.3));
        e.record(3, 130.0);
        e.record(3, 1.4);
        assert_eq!(e.at(3), Some(1.4));
        // Only the last three count.
        e.record(3, 1.5);
        e.record(3, 1.6);
        assert_eq!(e.at(3), Some(1.5));
        assert_eq!(e.at(4), None);
        assert_eq!(e.distinct_n(), 1);
    }

    #[test]
    fn steps_only_on_what_was_measured() {
        let mut e = Evidence::default();
        // Nothing known: stay.
        assert_eq!(e.target(2, 1.3, 1, 16), 2);
        e.record(2, 1.2);
        assert_eq!(e.target(2, 1.3, 1, 16), 2);
        // One above was tried and was cheap enough.
        e.record(3, 1.15);
        assert_eq!(e.target(2, 1.3, 1, 16), 3);
        // The current load costs too much.
        assert_eq!(e.target(3, 1.0, 1, 16), 2);
        // Never past the bounds.
        assert_eq!(e.target(3, 1.2, 3, 16), 3);
        assert_eq!(e.target(2, 1.3, 1, 2), 2);
    }

    #[test]
    fn a_tie_keeps_the_threshold_where_it_is() {
        // Phase H of the VM control test: every CPU busy, P_cont(2) 1.05-1.10
        // against P_numa + spill 1.04-1.09. Whichever side of the tie the threshold
        // is on, it stays there.
        let mut e = Evidence::default();
        for p in [1.05, 1.10, 1.08] {
            e.record(2, p);
        }
        for p_spill in [1.04, 1.07, 1.09] {
            assert_eq!(e.target(2, p_spill, 1, 2), 2, "at 2, P {p_spill}");
            assert_eq!(e.target(1, p_spill, 1, 2), 1, "at 1, P {p_spill}");
        }
        // Just past the margin it moves, either way.
        assert_eq!(e.target(2, 1.08 / (1.0 + TIE) - 0.001, 1, 2), 1);
        assert_eq!(e.target(1, 1.08 / (1.0 - TIE) + 0.001, 1, 2), 2);
    }

    #[test]
    fn points_from_before_an_absence_no_longer_count() {
        let mut e = Evidence::default();
        for p in [1.18, 1.17, 1.16] {
            e.record(2, p);
        }
        // A stay at 1 longer than STALE_AFTER: the next point at 2 starts afresh.
        for _ in 0..=STALE_AFTER {
            e.record(1, 1.0);
        }
        e.record(2, 1.05);
        assert_eq!(e.at(2), Some(1.05));
        // What is typical at 2 still counts them.
        assert_eq!(e.reference(2), Some(1.16));
        assert_eq!(e.largest(), Some(1.16));
        // Up to STALE_AFTER points elsewhere, the record goes on.
        for _ in 0..STALE_AFTER {
            e.record(1, 1.0);
        }
        e.record(2, 1.07);
        assert_eq!(e.at(2), Some(1.06));
        // An exploration's one interval at 3 leaves 2's record as it was.
        e.record(3, 1.5);
        e.record(2, 1.09);
        assert_eq!(e.at(2), Some(1.07));
    }

    #[test]
    fn the_clock_survives_a_restart() {
        let mut e = Evidence::default();
        for p in [1.18, 1.17, 1.16] {
            e.record(2, p);
        }
        for _ in 0..=STALE_AFTER {
            e.record(1, 1.0);
        }
        let mut restored = Evidence::from_state(&e.to_state(), 16);
        assert_eq!(restored, e);
        restored.record(2, 1.05);
        assert_eq!(restored.at(2), Some(1.05));
    }

    #[test]
    fn stored_points_are_cleaned_on_the_way_in() {
        let points = vec![
            ObservedPoint {
                n: 0,
                recent: vec![1.0],
                stale: 0,
                last: 0,
            },
            ObservedPoint {
                n: 2,
                recent: vec![9.0, 1.0, f64::NAN, 1.1, 1.2],
                stale: 0,
                last: 0,
            },
            ObservedPoint {
                n: 2,
                recent: vec![5.0],
                stale: 0,
                last: 0,
            },
            ObservedPoint {
                n: 40,
                recent: vec![1.0],
                stale: 0,
                last: 0,
            },
        ];
        let e = Evidence::from_state(&points, 16);
        assert_eq!(e.distinct_n(), 1);
        assert_eq!(e.to_state()[0].recent, vec![1.1, 1.2]);
    }
}
