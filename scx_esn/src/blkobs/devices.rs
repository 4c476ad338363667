// SPDX-License-Identifier: GPL-2.0-only
//! Disks and their home nodes: the table reports name them by
//! (`device_table`), what BPF is told (`register_devices`,
//! `register_paths` for multipath heads) and their busy time from
//! /sys/block/*/stat (`read_io_ticks`).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use esn_stats::devt::{DevT, DeviceInfo, DeviceTable};
use esn_topology::Topology;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf_intf;

/// The node a device's requests count as local to. A machine with a single
/// node has nothing remote, whatever sysfs says about the device.
pub fn effective_node(topo: &Topology, home: Option<u32>) -> Option<u32> {
    match (home, topo.nodes.as_slice()) {
        (Some(node), _) => Some(node),
        (None, [only]) => Some(only.id),
        _ => None,
    }
}

/// Disks (partitions fold into them) with the node their I/O is local to.
pub fn device_table(topo: &Topology) -> DeviceTable {
    DeviceTable::new(
        topo.devices
            .iter()
            .map(|d| DeviceInfo {
                name: d.name.clone(),
                dev: DevT::new(d.major, d.minor),
                node: effective_node(topo, d.home_node),
                partitions: d
                    .partitions
                    .iter()
                    .map(|p| DevT::new(p.major, p.minor))
                    .collect(),
            })
            .collect(),
    )
}

/// Tell BPF each disk's node, for the local/remote split.
pub fn register_devices(dev_home_node: &dyn MapCore, devices: &DeviceTable) -> Result<usize> {
    let mut n = 0;
    for dev in devices.devices() {
        let Some(node) = dev.node else { continue };
        dev_home_node
            .update(&dev.dev.0.to_ne_bytes(), &[node as u8], MapFlags::ANY)
            .with_context(|| format!("registering device {}", dev.name))?;
        n += 1;
    }
    Ok(n)
}

/// Tell BPF the path disks of multipath heads (hidden: a head's requests are
/// issued on them) by name: `(path, head's kernel dev_t)`.
pub fn register_paths<'p>(
    path_disk_dev: &dyn MapCore,
    paths: impl IntoIterator<Item = (&'p str, u32)>,
) -> Result<()> {
    for (path, head) in paths {
        let mut key = [0u8; bpf_intf::ESN_DISK_NAME_LEN as usize];
        let name = path.as_bytes();
        if name.len() >= key.len() {
            continue; // the kernel cuts names there: it cannot match
        }
        key[..name.len()].copy_from_slice(name);
        path_disk_dev
            .update(&key, &head.to_ne_bytes(), MapFlags::ANY)
            .with_context(|| format!("registering multipath path disk {path}"))?;
    }
    Ok(())
}

/// Every multipath head's paths, with the head's kernel dev_t.
pub fn topology_paths(topo: &Topology) -> impl Iterator<Item = (&str, u32)> {
    topo.devices.iter().flat_map(|d| {
        d.paths
            .iter()
            .map(move |p| (p.as_str(), DevT::new(d.major, d.minor).0))
    })
}

/// Each disk's io_ticks (ms busy since boot) from /sys/block/NAME/stat; a
/// disk whose file cannot be read is left out (its utilisation shows "-").
pub fn read_io_ticks(devices: &DeviceTable) -> BTreeMap<DevT, u64> {
    devices
        .devices()
        .iter()
        .filter_map(|d| {
            let text = std::fs::read_to_string(format!("/sys/block/{}/stat", d.name)).ok()?;
            Some((d.dev, esn_stats::snapshot::io_ticks_from_stat(&text)?))
        })
        .collect()
}
