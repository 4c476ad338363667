// SPDX-License-Identifier: GPL-2.0-only
//! What the tests' readings share: a 2-node machine with an NVMe disk on
//! node 1, its gauges and an estimated energy reading.

use std::time::{Duration, Instant};

use esn_stats::energy::EnergySource;
use esn_topology::devt::{DevT, DeviceInfo, DeviceTable};

use crate::cumulative::NodeGauge;

/// nvme0n1 (259:0) on node 1; with `vda`, also a virtio disk of no node.
pub fn devices(vda: bool) -> DeviceTable {
    let mut devices = vec![DeviceInfo {
        name: "nvme0n1".into(),
        dev: DevT::new(259, 0),
        node: Some(1),
        partitions: vec![],
    }];
    if vda {
        devices.push(DeviceInfo {
            name: "vda".into(),
            dev: DevT::new(254, 0),
            node: None,
            partitions: vec![],
        });
    }
    DeviceTable::new(devices)
}

/// Both nodes with 2 CPUs: node 0 places nothing under threshold 2, node 1
/// has `placed` under `threshold`.
pub fn gauges(placed: u32, threshold: u32) -> Vec<NodeGauge> {
    [(0, 0, 2), (1, placed, threshold)]
        .into_iter()
        .map(|(node, placed, threshold)| NodeGauge {
            node,
            cpus: 2,
            placed,
            threshold,
        })
        .collect()
}

/// One Instant for every reading of a test, so their spacing is exact.
pub fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The model's joules per node since start, `after` past the epoch.
pub fn energy(after: Duration, joules: [f64; 2]) -> esn_power::energy::Reading {
    esn_power::energy::Reading {
        source: EnergySource::Estimated,
        taken: epoch() + after,
        joules: vec![(0, joules[0]), (1, joules[1])],
    }
}
