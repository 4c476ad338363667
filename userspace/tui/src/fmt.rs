//! Short, fixed-style text for numbers in table cells.
//!
//! Every function here takes what the stats may hold (`None`, NaN, infinities,
//! absurdly large values) and returns something that fits a narrow column: "-"
//! stands for "no data", so a missing measurement never reads as a zero.

use esn_stats::report::with_suffix;

/// "-" when there is nothing to show.
pub(crate) const NONE: &str = "-";

/// A rate or count: whole numbers below 10 000, then three significant digits
/// with a k/M/G/T suffix, so a column stays at most six characters wide.
pub(crate) fn rate(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            if v.abs() < 9_999.5 {
                format!("{v:.0}")
            } else {
                with_suffix(v)
            }
        }
        _ => NONE.to_string(),
    }
}

pub(crate) fn count(v: u64) -> String {
    rate(Some(v as f64))
}

/// MB/s and other small quantities: two decimals below 10, one below 1000.
pub(crate) fn amount(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let a = v.abs();
            if a < 9.995 {
                format!("{v:.2}")
            } else if a < 999.95 {
                format!("{v:.1}")
            } else if a < 9_999.5 {
                format!("{v:.0}")
            } else {
                with_suffix(v)
            }
        }
        _ => NONE.to_string(),
    }
}

/// A share in [0, 1] as a whole percentage.
pub(crate) fn share(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{:.0}%", (v * 100.0).clamp(0.0, 100.0)),
        _ => NONE.to_string(),
    }
}

/// A percentage already in [0, 100], one decimal.
pub(crate) fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{:.1}%", v.clamp(0.0, 100.0)),
        _ => NONE.to_string(),
    }
}

/// A duration given in ns, in the unit that keeps it short.
pub(crate) fn nanos(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() && v >= 0.0 => {
            if v < 1e3 {
                format!("{v:.0}ns")
            } else if v < 1e6 {
                format!("{:.1}µs", v / 1e3)
            } else if v < 1e9 {
                format!("{:.1}ms", v / 1e6)
            } else {
                format!("{:.1}s", v / 1e9)
            }
        }
        _ => NONE.to_string(),
    }
}

/// A duration given in µs (the unit of [`esn_stats::LatencyReport`]).
pub(crate) fn micros(v: Option<f64>) -> String {
    nanos(v.map(|us| us * 1e3))
}

/// A ratio such as P_numa, two decimals.
pub(crate) fn ratio(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            if v.abs() < 1000.0 {
                format!("{v:.2}")
            } else {
                with_suffix(v)
            }
        }
        _ => NONE.to_string(),
    }
}

/// `[#####     ] 48%`: CPU busy share as a ten-cell bar and its number.
pub(crate) fn gauge(pct: Option<f64>) -> String {
    const CELLS: usize = 10;
    match pct {
        Some(p) if p.is_finite() => {
            let p = p.clamp(0.0, 100.0);
            let filled = ((p / 100.0) * CELLS as f64).round() as usize;
            let filled = filled.min(CELLS);
            format!(
                "[{}{}] {:.0}%",
                "#".repeat(filled),
                " ".repeat(CELLS - filled),
                p
            )
        }
        _ => NONE.to_string(),
    }
}

pub(crate) fn opt_u32(v: Option<u32>) -> String {
    v.map_or_else(|| NONE.to_string(), |v| v.to_string())
}

/// At most `max` characters, control characters shown as '?': a name that did
/// not come from the kernel's 16-byte comm must neither widen nor break a table.
pub(crate) fn clip(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    // Marks the cut, so a clipped name is not taken for the whole one.
    if s.chars().count() > max && max > 0 {
        out.pop();
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_non_finite_values_show_a_dash() {
        assert_eq!(rate(None), "-");
        assert_eq!(rate(Some(f64::NAN)), "-");
        assert_eq!(amount(Some(f64::INFINITY)), "-");
        assert_eq!(share(Some(f64::NAN)), "-");
        assert_eq!(pct(None), "-");
        assert_eq!(nanos(Some(-1.0)), "-");
        assert_eq!(ratio(Some(f64::NEG_INFINITY)), "-");
        assert_eq!(gauge(Some(f64::NAN)), "-");
        assert_eq!(opt_u32(None), "-");
    }

    #[test]
    fn numbers_stay_short() {
        assert_eq!(rate(Some(1234.4)), "1234");
        assert_eq!(rate(Some(12_345.0)), "12.3k");
        assert_eq!(rate(Some(99_970.0)), "100k");
        assert_eq!(count(u64::MAX), "18.4E");
        assert_eq!(amount(Some(4.567)), "4.57");
        assert_eq!(amount(Some(512.04)), "512.0");
        assert_eq!(share(Some(0.25)), "25%");
        assert_eq!(share(Some(7.0)), "100%");
        assert_eq!(nanos(Some(12_345.0)), "12.3µs");
        assert_eq!(nanos(Some(2.5e6)), "2.5ms");
        assert_eq!(micros(Some(85.0)), "85.0µs");
        assert_eq!(ratio(Some(1.3)), "1.30");
    }

    #[test]
    fn gauge_fills_in_tenths_and_clamps() {
        assert_eq!(gauge(Some(48.0)), "[#####     ] 48%");
        assert_eq!(gauge(Some(0.0)), "[          ] 0%");
        assert_eq!(gauge(Some(250.0)), "[##########] 100%");
        assert_eq!(gauge(Some(-3.0)), "[          ] 0%");
    }

    #[test]
    fn clip_cuts_and_marks_long_names() {
        assert_eq!(clip("fio", 16), "fio");
        assert_eq!(clip("abcdefghij", 4), "abc…");
        assert_eq!(clip("a\nb", 16), "a?b");
        assert_eq!(clip("abc", 0), "");
    }
}
