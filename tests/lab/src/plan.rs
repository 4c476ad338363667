// SPDX-License-Identifier: GPL-2.0-only
//! Which disks the lab penalises and how long each remote request spins.
//!
//! ```text
//!   disks with a home node (all, or --device)  ──► one spin time per disk node
//!     --us N:      N us from the nearest other node
//!     --factor F:  F x local latency - remote latency, both measured (calibrate.rs)
//!   ──► scaled by NUMA distance for farther nodes: spin(d) = spin(nearest) x (d-10)/(dn-10)
//!   ──► the (disk node, submitting node) table the BPF program reads
//! ```
//!
//! The distance scaling keeps the lab's nodes in the order the firmware gives them:
//! on a machine with unequal distances the farther node costs more, so "spill to the
//! nearest node" is something a scheduler can get right or wrong in the lab.

use anyhow::{bail, Result};
use esn_topology::{BlockDevice, Topology, LOCAL_DISTANCE};

/// A disk the lab watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabDisk {
    pub name: String,
    /// `(major << 20) | minor`, as the kernel's `disk->major/first_minor` give it.
    pub dev: u32,
    pub node: u32,
}

/// The disks to penalise: every disk with a known home node, or the `--device` names.
pub fn select_disks(topo: &Topology, names: &[String]) -> Result<Vec<LabDisk>> {
    let with_node: Vec<&BlockDevice> = topo
        .devices
        .iter()
        .filter(|d| d.home_node.is_some())
        .collect();
    let chosen: Vec<&BlockDevice> = if names.is_empty() {
        with_node
    } else {
        let mut v = Vec::new();
        for name in names {
            match topo.devices.iter().find(|d| &d.name == name) {
                Some(d) if d.home_node.is_some() => v.push(d),
                Some(d) => bail!(
                    "--device {name}: its home node is unknown ({}); the lab needs a disk \
                     attached to one node",
                    d.node_source
                ),
                None => bail!(
                    "--device {name}: no such whole disk (disks with a home node: {})",
                    list_or_none(with_node.iter().map(|d| d.name.as_str()))
                ),
            }
        }
        v
    };
    if chosen.is_empty() {
        bail!(
            "no block device with a known NUMA node (disks: {}): nothing can be remote; \
             the lab is meant for a VM with NVMe controllers on chosen nodes (tests/vm)",
            list_or_none(topo.devices.iter().map(|d| d.name.as_str()))
        );
    }
    Ok(chosen
        .into_iter()
        .map(|d| LabDisk {
            name: d.name.clone(),
            dev: (d.major << 20) | d.minor,
            node: d.home_node.unwrap_or_default(),
        })
        .collect())
}

fn list_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The nearest other node with CPUs, and its distance: where a remote request
/// costs the base spin. `None` when no other node has CPUs (nothing is remote).
pub fn nearest_remote(topo: &Topology, disk_node: u32) -> Option<(u32, u32)> {
    let node = *topo.spill_order(disk_node).first()?;
    let dist = topo.distance(disk_node, node).unwrap_or(LOCAL_DISTANCE * 2);
    Some((node, dist))
}

/// Spin for a request from a node at `dist`, given the spin at the nearest distance.
/// Distances at or below the local one (broken firmware tables) get the base spin.
pub fn scale_by_distance(base_ns: u64, dist: u32, nearest_dist: u32) -> u64 {
    let extra = |d: u32| d.saturating_sub(LOCAL_DISTANCE).max(1) as u64;
    base_ns.saturating_mul(extra(dist)) / extra(nearest_dist)
}

/// The spin table: `(disk node, submitting node, ns)` for every disk node in `base`
/// (its spin at the nearest distance) and every other node with CPUs.
pub fn spin_table(topo: &Topology, base: &[(u32, u64)]) -> Vec<(u32, u32, u64)> {
    let mut out = Vec::new();
    for &(disk_node, base_ns) in base {
        let Some((_, nearest)) = nearest_remote(topo, disk_node) else {
            continue;
        };
        for other in topo.spill_order(disk_node) {
            let dist = topo.distance(disk_node, other).unwrap_or(nearest);
            out.push((disk_node, other, scale_by_distance(base_ns, dist, nearest)));
        }
    }
    out
}

/// `--factor F`: the spin that makes a remote request take F times a local one,
/// from the two measured latencies. Never negative: a remote side already slower
/// than F x local gets no spin.
pub fn spin_for_factor(factor: f64, local_ns: f64, remote_ns: f64) -> u64 {
    (factor * local_ns - remote_ns).max(0.0).round() as u64
}

/// The next estimate of `--factor`'s spin from every (spin, ratio) point measured
/// so far (the first is the lab off: no spin): the least-squares line through them,
/// and the spin where it reads `factor`. On a loaded emulator host one pass's ratio
/// is off by 15-20 % (its 0.2-s slices swing by half), and a line through all the
/// points averages that where the line through the last two followed it (seen:
/// 3.25x, 2.68x, 1.77x in three passes). A line that does not rise measurably with
/// the spin (noise) gives way to the additive step from the last point and the
/// local latency. Bounded to two thirds..one and a half times the last spin: one
/// noisy measurement must not be able to double the penalty.
pub fn fit_spin(points: &[(u64, f64)], factor: f64, local_ns: f64) -> u64 {
    let Some(&(last_spin, last_ratio)) = points.last() else {
        return 0;
    };
    let spin = last_spin as f64;
    if !last_ratio.is_finite() {
        return last_spin;
    }
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.1.is_finite())
        .map(|&(x, y)| (x as f64, y))
        .collect();
    let n = pts.len() as f64;
    let mean_x = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    let span = pts.iter().map(|p| p.0).fold(f64::MIN, f64::max)
        - pts.iter().map(|p| p.0).fold(f64::MAX, f64::min);
    let next = if sxx > 0.0 && slope.is_finite() && slope * span > 0.05 {
        mean_x + (factor - mean_y) / slope
    } else {
        spin + (factor - last_ratio) * local_ns
    };
    let (lo, hi) = (spin * 2.0 / 3.0, spin * 1.5);
    if next.is_finite() {
        next.clamp(lo, hi).round() as u64
    } else {
        last_spin
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use esn_topology::{DeviceKind, Node};

    fn topo(dist: &[&[u32]], cpus: &[&[u32]], disks: &[(&str, Option<u32>)]) -> Topology {
        let nodes = dist
            .iter()
            .enumerate()
            .map(|(i, row)| Node {
                id: i as u32,
                cpus: cpus[i].to_vec(),
                distances: row
                    .iter()
                    .enumerate()
                    .map(|(j, &d)| (j as u32, d))
                    .collect(),
            })
            .collect();
        Topology {
            nodes,
            online_cpus: cpus.iter().flat_map(|c| c.iter().copied()).collect(),
            nr_cpu_ids: 8,
            devices: disks
                .iter()
                .enumerate()
                .map(|(i, (name, node))| BlockDevice {
                    name: name.to_string(),
                    major: 259,
                    minor: i as u32,
                    kind: DeviceKind::Nvme,
                    home_node: *node,
                    node_source: "test".into(),
                    controllers: vec![],
                    partitions: vec![],
                    paths: vec![],
                })
                .collect(),
        }
    }

    fn four_nodes() -> Topology {
        topo(
            &[
                &[10, 20, 30, 40],
                &[20, 10, 20, 30],
                &[30, 20, 10, 20],
                &[40, 30, 20, 10],
            ],
            &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]],
            &[("nvme0n1", Some(1)), ("nvme1n1", Some(3)), ("vda", None)],
        )
    }

    #[test]
    fn all_disks_with_a_node_by_default() {
        let disks = select_disks(&four_nodes(), &[]).unwrap();
        let names: Vec<_> = disks.iter().map(|d| (d.name.as_str(), d.node)).collect();
        assert_eq!(names, [("nvme0n1", 1), ("nvme1n1", 3)]);
        assert_eq!(disks[1].dev, (259 << 20) | 1);
    }

    #[test]
    fn device_names_are_checked() {
        let t = four_nodes();
        assert_eq!(select_disks(&t, &["nvme1n1".into()]).unwrap().len(), 1);
        let err = select_disks(&t, &["sdz".into()]).unwrap_err().to_string();
        assert!(err.contains("nvme0n1, nvme1n1"), "{err}");
        let err = select_disks(&t, &["vda".into()]).unwrap_err().to_string();
        assert!(err.contains("home node is unknown"), "{err}");
    }

    #[test]
    fn no_disk_with_a_node_is_an_error() {
        let t = topo(&[&[10]], &[&[0, 1]], &[("vda", None)]);
        let err = select_disks(&t, &[]).unwrap_err().to_string();
        assert!(
            err.contains("nothing can be remote") && err.contains("vda"),
            "{err}"
        );
    }

    #[test]
    fn farther_nodes_spin_longer() {
        let t = four_nodes();
        // Disk on node 3: node 2 is nearest (20), node 1 at 30, node 0 at 40.
        let table = spin_table(&t, &[(3, 100_000)]);
        assert_eq!(
            table,
            vec![(3, 2, 100_000), (3, 1, 200_000), (3, 0, 300_000)]
        );
        assert_eq!(nearest_remote(&t, 1), Some((0, 20)));
    }

    #[test]
    fn one_node_has_nothing_remote() {
        let t = topo(
            &[&[10, 20], &[20, 10]],
            &[&[0, 1], &[]],
            &[("nvme0n1", Some(0))],
        );
        assert_eq!(nearest_remote(&t, 0), None);
        assert!(spin_table(&t, &[(0, 1000)]).is_empty());
    }

    #[test]
    fn broken_distances_do_not_divide_by_zero() {
        assert_eq!(scale_by_distance(500, 10, 10), 500);
        assert_eq!(scale_by_distance(500, 0, 20), 50);
    }

    #[test]
    fn refinement_follows_the_measured_line() {
        let fit = |pts: &[(u64, f64)], local| fit_spin(pts, 2.0, local);
        // 1.0 without, 1.7 with 100 us: 2.0 needs 143 us.
        assert_eq!(fit(&[(0, 1.0), (100_000, 1.7)], 300_000.0), 142_857);
        // Overshot: 2.3 with 400 us from 1.1: 2.0 needs 300 us.
        assert_eq!(fit(&[(0, 1.1), (400_000, 2.3)], 300_000.0), 300_000);
        // Points on one line, the last one noisy: the fit, not the last two.
        // (Through the last two alone: 2.0 at 450 - 0.4 / 0.6 x 150 = 350 us.)
        let pts = [(0, 1.0), (150_000, 1.5), (300_000, 2.0), (450_000, 2.4)];
        assert_eq!(fit(&pts, 1.0), 312_766);
        // Three points that scatter: the least-squares line, then the bound.
        let pts = [(0, 1.0), (100_000, 1.5), (200_000, 3.0)];
        assert_eq!(fit(&pts, 1.0), 133_333);
        // No measurable effect: additive step from the local latency, bounded.
        assert_eq!(fit(&[(0, 1.2), (100_000, 1.2)], 100_000.0), 150_000);
        assert_eq!(fit_spin(&[(0, 1.0), (100_000, 1.0)], 20.0, 1e9), 150_000);
        // A line that falls (more spin, lower ratio: noise) is not followed.
        assert_eq!(fit(&[(0, 2.4), (450_000, 1.9)], 100_000.0), 460_000);
        // A noisy pass cannot double or halve the estimate it measured.
        assert_eq!(fit(&[(0, 1.085), (609_000, 1.56)], 831_000.0), 913_500);
        assert_eq!(fit(&[(0, 1.0), (100_000, 5.0)], 1.0), 66_667);
        assert_eq!(fit(&[(0, 1.0), (100_000, f64::NAN)], 1.0), 100_000);
        assert_eq!(fit(&[], 1.0), 0);
    }

    #[test]
    fn factor_spin_from_measured_latencies() {
        // Research figures: 10.9 us local, asked for 2.0, remote measured 12 us.
        assert_eq!(spin_for_factor(2.0, 10_900.0, 12_000.0), 9_800);
        assert_eq!(spin_for_factor(1.05, 10_000.0, 11_000.0), 0);
        assert_eq!(spin_for_factor(1.0, 10_000.0, 10_000.0), 0);
    }
}
