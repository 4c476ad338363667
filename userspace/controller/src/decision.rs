//! What the controller tells the binary after each interval.
//!
//! The `Serialize` form is meant to be logged as is, one object per node and
//! interval, so every input of the decision is in it: with the curve and P_numa one
//! can redo the threshold by hand.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::penalty::PenaltySource;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub node: u32,
    /// Most I/O-bound tasks to keep on the node during the next interval: the value to
    /// write into the BPF map. One above the learned threshold when `exploring`.
    pub threshold: u32,
    /// The NUMA penalty the contention was balanced against.
    pub p_numa: f64,
    pub p_numa_source: PenaltySource,
    /// What a task spilled to the next node waits there for a CPU, per local
    /// request latency (0 until measured): P_cont was balanced against
    /// `p_numa + spill_contention`.
    #[serde(default)]
    pub spill_contention: f64,
    /// (a, b, c) of the fitted P_cont(n) = a·n² + b·n + c, once the fit has points at
    /// three distinct n; `None` before.
    pub curve: Option<[f64; 3]>,
    /// The threshold the fitted curve asks for, within bounds but before hysteresis
    /// and rate limiting; `None` while the curve is not usable, when the threshold
    /// follows direct observations instead.
    pub n_star: Option<u32>,
    /// This interval tries one task more than the learned threshold, to see the curve
    /// there.
    pub exploring: bool,
    /// `placed` of the sample this decision answers.
    pub placed: u32,
    /// P_cont observed in that sample, if it had enough data to give a point.
    pub p_cont: Option<f64>,
    /// Under the throughput objective: the devices' completions per second in that
    /// sample, if it had enough of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// Under the throughput objective: what the next interval does ("settled",
    /// "probing up", "probing all", "probing down").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub climb: Option<String>,
}

impl Decision {
    /// "P_numa 1.02 measured + spill 0.15, P_cont 1.31 at n=2, curve
    /// 0.020n²+0.050n+1.000, n* 3": the inputs of the decision, for the log and
    /// the stats.
    pub fn inputs_text(&self) -> String {
        let mut out = format!(
            "P_numa {:.2} {} + spill {:.2}",
            self.p_numa,
            self.p_numa_source.as_str(),
            self.spill_contention
        );
        match self.p_cont {
            Some(p) => {
                let _ = write!(out, ", P_cont {p:.2} at n={}", self.placed);
            }
            None => {
                let _ = write!(out, ", P_cont - at n={}", self.placed);
            }
        }
        match self.curve {
            Some([a, b, c]) => {
                let _ = write!(out, ", curve {a:.3}n²{b:+.3}n{c:+.3}");
            }
            None => out.push_str(", curve -"),
        }
        match self.n_star {
            Some(n) => {
                let _ = write!(out, ", n* {n}");
            }
            None => out.push_str(", n* -"),
        }
        if let Some(doing) = &self.climb {
            match self.iops {
                Some(iops) => {
                    let _ = write!(out, " | IOPS {iops:.0}, {doing}");
                }
                None => {
                    let _ = write!(out, " | IOPS -, {doing}");
                }
            }
        }
        out
    }
}

/// The `--stats` lines of the decisions, one per controlled node, each with
/// the threshold in force on its node (`thresholds_in_force`, by node id;
/// the decision's own where the node has none).
pub fn decisions_text(decisions: &[Decision], thresholds_in_force: &[u32]) -> String {
    let mut out = String::new();
    for d in decisions {
        let in_force = thresholds_in_force
            .get(d.node as usize)
            .copied()
            .unwrap_or(d.threshold);
        let _ = writeln!(
            out,
            "control n{}: threshold {in_force}{} placed {} | {}",
            d.node,
            if d.exploring { " (exploring)" } else { "" },
            d.placed,
            d.inputs_text()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision() -> Decision {
        Decision {
            node: 1,
            threshold: 2,
            p_numa: 1.02,
            p_numa_source: PenaltySource::Measured,
            spill_contention: 0.15,
            curve: Some([0.02, 0.05, 1.0]),
            n_star: Some(3),
            exploring: true,
            placed: 2,
            p_cont: Some(1.31),
            iops: None,
            climb: None,
        }
    }

    #[test]
    fn penalty_source_names_are_the_json_ones() {
        for source in [
            PenaltySource::Prior,
            PenaltySource::Measured,
            PenaltySource::Override,
        ] {
            assert_eq!(serde_json::to_value(source).unwrap(), source.as_str());
        }
    }

    #[test]
    fn inputs_and_lines_read_as_documented() {
        let mut d = decision();
        assert_eq!(
            d.inputs_text(),
            "P_numa 1.02 measured + spill 0.15, P_cont 1.31 at n=2, curve 0.020n²+0.050n+1.000, n* 3"
        );
        assert_eq!(
            decisions_text(&[d.clone()], &[2, 3]),
            "control n1: threshold 3 (exploring) placed 2 | P_numa 1.02 measured + spill \
             0.15, P_cont 1.31 at n=2, curve 0.020n²+0.050n+1.000, n* 3\n"
        );
        d.p_cont = None;
        d.curve = None;
        d.n_star = None;
        d.climb = Some("probing up".into());
        d.iops = Some(1234.4);
        assert_eq!(
            d.inputs_text(),
            "P_numa 1.02 measured + spill 0.15, P_cont - at n=2, curve -, n* - | IOPS 1234, probing up"
        );
    }
}
