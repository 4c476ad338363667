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
//! The same observations serve the fit twice: their median at an n is what a new
//! point there is checked against before it may move the curve (see `fit.rs`), and
//! the set of n with observations is what "the fit has points at three distinct n"
//! counts, which is why it is cleared together with the fit.

use crate::persist::ObservedPoint;

/// Points kept per n for the median.
pub(crate) const RECENT: usize = 3;

/// How far, relative to P_numa, a median must clear it before the rule moves.
pub(crate) const TIE: f64 = 0.05;

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Evidence {
    /// Sorted by n, one entry per distinct n.
    points: Vec<ObservedPoint>,
}

impl Evidence {
    pub(crate) fn record(&mut self, n: u32, p_cont: f64) {
        let at = match self.points.binary_search_by_key(&n, |p| p.n) {
            Ok(i) => i,
            Err(i) => {
                self.points.insert(
                    i,
                    ObservedPoint {
                        n,
                        recent: Vec::with_capacity(RECENT),
                    },
                );
                i
            }
        };
        let recent = &mut self.points[at].recent;
        if recent.len() == RECENT {
            recent.remove(0);
        }
        recent.push(p_cont);
    }

    pub(crate) fn clear(&mut self) {
        self.points.clear();
    }

    pub(crate) fn distinct_n(&self) -> usize {
        self.points.len()
    }

    /// The largest median over all n: a typical measured value to compare a point
    /// with where nothing else is known.
    pub(crate) fn largest(&self) -> Option<f64> {
        self.points
            .iter()
            .filter_map(|p| self.at(p.n))
            .max_by(f64::total_cmp)
    }

    /// The smallest and the largest n with points.
    pub(crate) fn span(&self) -> Option<(u32, u32)> {
        Some((self.points.first()?.n, self.points.last()?.n))
    }

    /// Median of the recent points at n.
    pub(crate) fn at(&self, n: u32) -> Option<f64> {
        let i = self.points.binary_search_by_key(&n, |p| p.n).ok()?;
        let mut v = self.points[i].recent.clone();
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        match v.len() {
            0 => None,
            len if len % 2 == 1 => Some(v[mid]),
            _ => Some(0.5 * (v[mid - 1] + v[mid])),
        }
    }

    /// The median at n once there are [`RECENT`] points there (the newest
    /// included): what that point is compared with to tell an outlier. With fewer,
    /// one outlier could still sway the median.
    pub(crate) fn reference(&self, n: u32) -> Option<f64> {
        let i = self.points.binary_search_by_key(&n, |p| p.n).ok()?;
        (self.points[i].recent.len() >= RECENT)
            .then(|| self.at(n))
            .flatten()
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
    /// [`RECENT`] of them (the newest), n within [1, max], first entry per n.
    pub(crate) fn from_state(points: &[ObservedPoint], max: u32) -> Evidence {
        let mut e = Evidence::default();
        for p in points {
            if p.n == 0 || p.n > max || e.at(p.n).is_some() {
                continue;
            }
            let skip = p.recent.len().saturating_sub(RECENT);
            for &v in p.recent.iter().skip(skip).filter(|v| v.is_finite()) {
                e.record(p.n, v);
            }
        }
        e
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
    fn stored_points_are_cleaned_on_the_way_in() {
        let points = vec![
            ObservedPoint {
                n: 0,
                recent: vec![1.0],
            },
            ObservedPoint {
                n: 2,
                recent: vec![9.0, 1.0, f64::NAN, 1.1, 1.2],
            },
            ObservedPoint {
                n: 2,
                recent: vec![5.0],
            },
            ObservedPoint {
                n: 40,
                recent: vec![1.0],
            },
        ];
        let e = Evidence::from_state(&points, 16);
        assert_eq!(e.distinct_n(), 1);
        assert_eq!(e.to_state()[0].recent, vec![1.1, 1.2]);
    }
}
