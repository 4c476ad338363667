//! The contention curve P_cont(n) ≈ a·n² + b·n + c, fitted by recursive least
//! squares (RLS) with exponential forgetting.
//!
//! The fit keeps the coefficients θ and the information matrix R (the inverse of
//! the covariance: how much the points so far pin down each direction of θ) and
//! folds in one point at a time, which is what a controller called once per
//! interval needs: no history, constant work. Per point (n, y), with φ = (x², x, 1):
//!
//! ```text
//!   R ← λ·R + (1−λ)·ρ·I          forget: every old point weighs λ times less,
//!   θ ← θ + (1−λ)·ρ·R⁻¹(θ₀ − θ)     but R never falls below ρ·I
//!   q = φᵀR⁻¹φ                       spread of the prediction at n
//!   e = clip(y − θᵀφ)                innovation, robustly clipped
//!   θ ← θ + R⁻¹φ · e / (1 + q)
//!   R ← R + φφᵀ
//! ```
//!
//! Clipping aside, that is exactly the minimiser of Σ λ^age·(yᵢ − φᵢᵀθ)² + ρ·|θ − θ₀|²:
//! exponentially weighted least squares with a tiny ridge towards θ₀ = "no
//! contention" (P_cont = 1), R being taken after the forgetting step.
//!
//! Why it is written this way:
//!
//! * **The ridge is replenished (no wind-up).** Textbook RLS divides the covariance
//!   by λ at every point. The controller sits at one threshold for hours, seeing n = t
//!   and now and then t + 1, so most directions of θ get no new data and their
//!   covariance would grow without end until rounding or one noisy point swings the
//!   curve. Here the information in an unexcited direction decays to ρ, never to 0:
//!   the fit then says "don't know" there, with a standard error to match, and the
//!   ridge picks, among the curves through the recent data, the one nearest θ₀.
//!   ρ ([`RIDGE`]) is far below what a single point contributes, so it biases
//!   nothing the data pin down.
//! * **Information form.** The forgetting step adds ρ·I, which is not a rank-one
//!   change, so the covariance cannot be updated by the usual rank-one formula; with R
//!   itself each step is a 3×3 Cholesky solve, and the solve failing is the signal
//!   that R stopped being usable, upon which the fit starts over.
//! * **Scaled regressor.** n is regressed as x = n / sqrt(max threshold), so x² and x
//!   stay within the same factor of 1 on both sides over the whole range. With raw n
//!   on a 256-CPU node, n² reaches 65536 and R would mix numbers many orders of
//!   magnitude apart.
//! * **Outliers are clipped against what n measured recently.** Once an n has
//!   [`crate::evidence::RECENT`] points, a new one is compared with their median
//!   (itself included): its innovation, divided by sqrt(1 + q), its expected spread,
//!   may differ from the median's by at most `outlier_sigmas` robust standard
//!   deviations. The deviation is 1.25 × a moving average of the clipped absolute
//!   normalised innovations (1.25 turns a mean absolute deviation into a standard
//!   deviation for Gaussian noise), fed only where the fit already predicts well
//!   (q < 1), since elsewhere the innovation is mostly the fit's own ignorance.
//!   Clipping against the median rather than against the curve matters: a curve
//!   that went wrong where the node rarely runs (say, at t + 1, seen once per
//!   exploration) would otherwise call every correct point there an outlier, and
//!   stay wrong for good. One 100× interval moves the curve about as much as one
//!   ordinary noisy interval; a lasting change passes once it is the median.
//! * **And the first points at a new n against the curve.** Until an n has its
//!   median, a point there may be at most [`FIRST_POINT_FACTOR`] times above or
//!   below the fitted value (or, before the curve is usable, the largest median
//!   measured anywhere). In a least-squares fit one absurd point at an otherwise
//!   empty n would decide the curve's shape until forgotten, hundreds of intervals
//!   later; a factor of four is far more than any real step from one n to the next.

use crate::linalg::{
    add_outer, diag, dot, inverse_spd, mat_vec, scale_shift, solve_spd, Mat3, Vec3,
};
use crate::persist::FitState;

/// ρ: the information that never decays, per coefficient (in scaled units).
const RIDGE: f64 = 1e-6;
/// The initial guess: no contention at all, P_cont(n) = 1.
const THETA_INIT: Vec3 = [0.0, 0.0, 1.0];
/// Starting robust deviation, in P_cont units (10 % of the contention-free value).
const NOISE_INIT: f64 = 0.1;
/// The deviation estimate never drops below this, so a noiseless stretch does not
/// make the fit deaf to a real change.
const NOISE_FLOOR: f64 = 0.01;
/// Weight of a new point in the deviation estimate.
const NOISE_RATE: f64 = 0.05;
/// The first points at an n may be at most this factor above or below what they
/// are compared with.
const FIRST_POINT_FACTOR: f64 = 4.0;
/// The first points at an n, where the curve is usable, may be at most this many
/// robust deviations off it (in normalised innovations, so an uncertain
/// extrapolation allows more).
const FIRST_POINT_SIGMAS: f64 = 10.0;
/// Mean absolute deviation to standard deviation, for Gaussian noise.
const MAD_TO_SIGMA: f64 = 1.25;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuadraticFit {
    /// Coefficients of x², x, 1 with x = n / scale.
    theta: Vec3,
    /// R, in the same scaled units.
    info: Mat3,
    scale: f64,
    /// Moving average of the absolute clipped normalised innovations.
    mean_abs_innovation: f64,
}

/// What a new point is checked against before it may move the curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Reference {
    /// The median of the recent points at its n, itself included: the point may
    /// stray from it by `outlier_sigmas` robust deviations (in normalised
    /// innovations), no further.
    Median(f64),
    /// One of the first points at its n, the curve being usable: within
    /// [`FIRST_POINT_FACTOR`] of the fitted value there.
    Curve,
    /// One of the first points at its n, before the curve is usable: within
    /// [`FIRST_POINT_FACTOR`] of this value measured elsewhere.
    Typical(f64),
    /// The very first point: nothing to compare it with.
    Nothing,
}

/// What an update did, for the caller's bookkeeping of distinct n.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Update {
    Applied,
    /// The fit stopped being usable (not finite, R not positive definite) and
    /// started over: the points seen so far are no longer part of it.
    Reset,
}

impl QuadraticFit {
    /// A fit that knows nothing yet, for thresholds up to `max_threshold`.
    pub(crate) fn new(max_threshold: u32) -> QuadraticFit {
        QuadraticFit::fresh(f64::from(max_threshold.max(1)).sqrt())
    }

    fn fresh(scale: f64) -> QuadraticFit {
        QuadraticFit {
            theta: THETA_INIT,
            info: diag(RIDGE),
            scale,
            mean_abs_innovation: NOISE_INIT / MAD_TO_SIGMA,
        }
    }

    fn phi(&self, n: u32) -> Vec3 {
        let x = f64::from(n) / self.scale;
        [x * x, x, 1.0]
    }

    /// A view for predictions with their standard errors, or `None` if R cannot be
    /// inverted (which [`QuadraticFit::update`] never leaves behind).
    pub(crate) fn predictor(&self) -> Option<Predictor<'_>> {
        Some(Predictor {
            fit: self,
            cov: inverse_spd(&self.info)?,
            sigma: self.sigma(),
        })
    }

    /// (a, b, c) of a·n² + b·n + c, i.e. with the scaling undone.
    pub(crate) fn coefficients(&self) -> Vec3 {
        let [ta, tb, tc] = self.theta;
        [ta / (self.scale * self.scale), tb / self.scale, tc]
    }

    /// Folds in the point (n, y), checked against `reference` first.
    pub(crate) fn update(
        &mut self,
        n: u32,
        y: f64,
        reference: Reference,
        lambda: f64,
        outlier_sigmas: f64,
    ) -> Update {
        match self.try_update(n, y, reference, lambda, outlier_sigmas) {
            Some(next) => {
                *self = next;
                Update::Applied
            }
            None => {
                *self = QuadraticFit::fresh(self.scale);
                Update::Reset
            }
        }
    }

    /// The fit after (n, y), or `None` if anything stopped being finite or positive
    /// definite on the way.
    fn try_update(
        &self,
        n: u32,
        y: f64,
        reference: Reference,
        lambda: f64,
        outlier_sigmas: f64,
    ) -> Option<Self> {
        let phi = self.phi(n);

        // Forget, and let the replenished ridge pull θ towards θ₀ by what it adds.
        let floor = (1.0 - lambda) * RIDGE;
        let info = scale_shift(&self.info, lambda, floor);
        let toward_init: Vec3 = std::array::from_fn(|i| floor * (THETA_INIT[i] - self.theta[i]));
        let pull = solve_spd(&info, &toward_init)?;
        let theta: Vec3 = std::array::from_fn(|i| self.theta[i] + pull[i]);

        // R⁻¹φ, and the prediction's spread q.
        let gain_dir = solve_spd(&info, &phi)?;
        let q = dot(&phi, &gain_dir);
        let spread = (1.0 + q).sqrt();

        let predicted = dot(&theta, &phi);
        let within_factor = |base: f64| {
            let base = base.max(1.0);
            (y.clamp(base / FIRST_POINT_FACTOR, base * FIRST_POINT_FACTOR) - predicted) / spread
        };
        let clipped = match reference {
            Reference::Median(median) => {
                let centre = (median - predicted) / spread;
                let limit = outlier_sigmas * self.sigma();
                ((y - predicted) / spread).clamp(centre - limit, centre + limit)
            }
            Reference::Curve => {
                let limit = FIRST_POINT_SIGMAS * self.sigma();
                within_factor(predicted).clamp(-limit, limit)
            }
            Reference::Typical(value) => within_factor(value),
            Reference::Nothing => (y - predicted) / spread,
        };
        // Only where the fit can already predict (q below one noise variance: the
        // recent points around n outweigh one new point) is the innovation noise
        // rather than the fit's own ignorance.
        let mean_abs_innovation = if q < 1.0 {
            self.mean_abs_innovation + NOISE_RATE * (clipped.abs() - self.mean_abs_innovation)
        } else {
            self.mean_abs_innovation
        };

        // The clipped innovation back in P_cont units, times R⁻¹φ / (1 + q), which is
        // the gain R_new⁻¹φ of the updated R by Sherman–Morrison.
        let step = clipped / spread;
        let next = QuadraticFit {
            theta: std::array::from_fn(|i| theta[i] + gain_dir[i] * step),
            info: add_outer(&info, &phi),
            scale: self.scale,
            mean_abs_innovation,
        };
        next.is_sound().then_some(next)
    }

    /// The robust standard deviation of a point around the curve.
    fn sigma(&self) -> f64 {
        MAD_TO_SIGMA * self.mean_abs_innovation.max(NOISE_FLOOR / MAD_TO_SIGMA)
    }

    /// Finite everywhere and R positive definite.
    fn is_sound(&self) -> bool {
        self.theta.iter().all(|v| v.is_finite())
            && self.mean_abs_innovation.is_finite()
            && self.mean_abs_innovation >= 0.0
            && self.scale.is_finite()
            && self.scale >= 1.0
            && solve_spd(&self.info, &[0.0, 0.0, 1.0]).is_some()
    }

    pub(crate) fn to_state(&self) -> FitState {
        FitState {
            scale: self.scale,
            theta: self.theta,
            information: self.info,
            mean_abs_innovation: self.mean_abs_innovation,
        }
    }

    /// Rebuilds a fit from stored state, or `None` if the state is not sound
    /// (anything not finite, R not positive definite, a scale below 1).
    ///
    /// The stored scale is kept even if the node's bound changed since: the
    /// coefficients are only meaningful with the scale they were fitted under.
    pub(crate) fn from_state(s: &FitState) -> Option<QuadraticFit> {
        let fit = QuadraticFit {
            theta: s.theta,
            info: s.information,
            scale: s.scale,
            mean_abs_innovation: s.mean_abs_innovation,
        };
        fit.is_sound().then_some(fit)
    }
}

/// Predictions of one fit, each with its standard error: σ·sqrt(φᵀR⁻¹φ), how far the
/// fitted value at n may be from the true one given the noise and how many (recent)
/// points back it up around n.
pub(crate) struct Predictor<'a> {
    fit: &'a QuadraticFit,
    cov: Mat3,
    sigma: f64,
}

impl Predictor<'_> {
    /// (fitted P_cont(n), its standard error).
    pub(crate) fn at(&self, n: u32) -> (f64, f64) {
        let phi = self.fit.phi(n);
        let q = dot(&phi, &mat_vec(&self.cov, &phi)).max(0.0);
        (dot(&self.fit.theta, &phi), self.sigma * q.sqrt())
    }
}
