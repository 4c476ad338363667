//! Where the fitted curve puts the threshold.
//!
//! The balance point is the largest n whose fitted P_cont(n) is no worse than
//! P_numa. Two refinements make it safe to act on a curve fitted from noisy points:
//!
//! * **Walk from the current threshold.** Instead of scanning the whole range, the
//!   target is found by walking from the current threshold t: up while the next n is
//!   still within P_numa, or down while the current n is beyond it. For a growing
//!   curve that is the same n as a scan; for a noisy fit that dips again far from
//!   the data (a quadratic extrapolated is not to be trusted), the walk stops at the
//!   crossing next to the data instead of jumping to a threshold nothing was
//!   measured near.
//! * **Confidence.** Each step of the walk needs the fitted value to clear P_numa by
//!   [`CONFIDENCE`] standard errors of that value. Near the data the standard error
//!   is small and this changes little; at t + 1, known only from explorations, it
//!   keeps one noisy exploration from pulling the threshold over a crossing that is
//!   a hair away, and back, and over again; far from the data it stops the walk
//!   early, so the threshold gets there step by step, measuring on the way. The
//!   price: a balance point closer to P_numa than the noise can resolve is not
//!   crossed, which costs at most one task of the threshold.

use crate::fit::QuadraticFit;

/// Standard errors a fitted value must clear P_numa by before the walk takes a step.
const CONFIDENCE: f64 = 1.0;

/// The threshold the curve asks for, within [min, max]; `None` when the curve is not
/// usable: its predictions cannot be computed, or it falls across `observed`, the
/// span of n it has points for (contention that falls as tasks are added is noise,
/// not a curve to act on). Only the observed span is judged: beyond it the curve is
/// an extrapolation, which the standard errors already keep the walk from trusting.
pub(crate) fn fitted_target(
    fit: &QuadraticFit,
    observed: (u32, u32),
    current: u32,
    (min, max): (u32, u32),
    p_numa: f64,
) -> Option<u32> {
    if min == max {
        return Some(min);
    }
    let predict = fit.predictor()?;
    let (at_low, _) = predict.at(observed.0);
    let (at_high, _) = predict.at(observed.1);
    if !at_low.is_finite() || !at_high.is_finite() || at_high < at_low {
        return None;
    }
    let within = |n: u32| {
        let (p, se) = predict.at(n);
        p + CONFIDENCE * se <= p_numa
    };
    let beyond = |n: u32| {
        let (p, se) = predict.at(n);
        p - CONFIDENCE * se > p_numa
    };

    let mut n = current.clamp(min, max);
    if beyond(n) {
        while n > min && beyond(n) {
            n -= 1;
        }
    } else {
        while n < max && within(n + 1) {
            n += 1;
        }
    }
    Some(n)
}
