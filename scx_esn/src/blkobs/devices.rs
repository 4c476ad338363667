// SPDX-License-Identifier: GPL-2.0-only
//! Disks as BPF sees them: their local nodes (`register_devices`, from the
//! table `Plan::device_table` makes), multipath heads' path disks
//! (`register_paths`) and their busy time from /sys/block/*/stat
//! (`read_io_ticks`).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use esn_topology::devt::{DevT, DeviceTable};
use esn_topology::Topology;
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf_intf;

/// Tell BPF each disk's local node, for the local/remote split and placement.
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
