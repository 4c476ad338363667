//! The little 3×3 linear algebra the curve fit needs.
//!
//! Symmetric positive definite systems are solved by Cholesky factorisation, which
//! also serves as the test that a matrix still is positive definite: rounding, or a
//! corrupted restore, can break that, and the fit must notice rather than divide by
//! a pivot of zero.

pub(crate) type Vec3 = [f64; 3];
pub(crate) type Mat3 = [[f64; 3]; 3];

pub(crate) fn dot(a: &Vec3, b: &Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub(crate) fn diag(v: f64) -> Mat3 {
    [[v, 0.0, 0.0], [0.0, v, 0.0], [0.0, 0.0, v]]
}

/// k·m + d·I.
pub(crate) fn scale_shift(m: &Mat3, k: f64, d: f64) -> Mat3 {
    let mut out = *m;
    for (i, row) in out.iter_mut().enumerate() {
        for v in row.iter_mut() {
            *v *= k;
        }
        row[i] += d;
    }
    out
}

/// m + v·vᵀ, exactly symmetric whatever the rounding.
pub(crate) fn add_outer(m: &Mat3, v: &Vec3) -> Mat3 {
    let mut out = *m;
    for i in 0..3 {
        for j in i..3 {
            let x = 0.5 * (m[i][j] + m[j][i]) + v[i] * v[j];
            out[i][j] = x;
            out[j][i] = x;
        }
    }
    out
}

/// The lower Cholesky factor of a symmetric matrix, or `None` if it is not
/// positive definite (or not finite).
fn cholesky(m: &Mat3) -> Option<Mat3> {
    let mut l = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..=i {
            let sum = m[i][j] - partial_dot(&l[i], &l[j], j);
            if i == j {
                if !(sum > 0.0 && sum.is_finite()) {
                    return None;
                }
                l[i][i] = sum.sqrt();
            } else {
                l[i][j] = sum / l[j][j];
            }
        }
    }
    Some(l)
}

/// `Σ a[k]·b[k]` over the first `len` entries.
fn partial_dot(a: &Vec3, b: &Vec3, len: usize) -> f64 {
    a[..len].iter().zip(&b[..len]).map(|(x, y)| x * y).sum()
}

/// x with m·x = b, for a symmetric positive definite m; `None` if m is not.
pub(crate) fn solve_spd(m: &Mat3, b: &Vec3) -> Option<Vec3> {
    let l = cholesky(m)?;
    // L·y = b, then Lᵀ·x = y (row i of Lᵀ is column i of L).
    let mut y = [0.0; 3];
    for i in 0..3 {
        y[i] = (b[i] - partial_dot(&l[i], &y, i)) / l[i][i];
    }
    let mut x = [0.0; 3];
    for i in (0..3).rev() {
        let column: Vec3 = [l[0][i], l[1][i], l[2][i]];
        let later: f64 = (i + 1..3).map(|k| column[k] * x[k]).sum();
        x[i] = (y[i] - later) / l[i][i];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// The inverse of a symmetric positive definite matrix, column by column; `None` if
/// it is not.
pub(crate) fn inverse_spd(m: &Mat3) -> Option<Mat3> {
    let cols = [
        solve_spd(m, &[1.0, 0.0, 0.0])?,
        solve_spd(m, &[0.0, 1.0, 0.0])?,
        solve_spd(m, &[0.0, 0.0, 1.0])?,
    ];
    Some(std::array::from_fn(|i| std::array::from_fn(|j| cols[j][i])))
}

pub(crate) fn mat_vec(m: &Mat3, v: &Vec3) -> Vec3 {
    [dot(&m[0], v), dot(&m[1], v), dot(&m[2], v)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_known_system() {
        let m = [[4.0, 2.0, 0.6], [2.0, 5.0, 1.0], [0.6, 1.0, 3.0]];
        let x = [1.0, -2.0, 0.5];
        let b = [dot(&m[0], &x), dot(&m[1], &x), dot(&m[2], &x)];
        let got = solve_spd(&m, &b).unwrap();
        for (g, w) in got.iter().zip(x) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
        let inv = inverse_spd(&m).unwrap();
        for (g, w) in mat_vec(&inv, &b).iter().zip(x) {
            assert!((g - w).abs() < 1e-12, "{inv:?}");
        }
    }

    #[test]
    fn refuses_what_is_not_positive_definite() {
        let singular = [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        assert_eq!(solve_spd(&singular, &[1.0, 1.0, 1.0]), None);
        let nan = [[f64::NAN, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        assert_eq!(solve_spd(&nan, &[1.0, 1.0, 1.0]), None);
        assert_eq!(solve_spd(&diag(-1.0), &[1.0, 1.0, 1.0]), None);
    }
}
