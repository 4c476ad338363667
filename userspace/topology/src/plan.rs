//! What the BPF side is told about the machine, derived from the topology.
//!
//! ```text
//!  Topology (sysfs) ──► Plan ──► rodata: nr_nodes, cpu_node[], node_has_cpus[], spill_order[][]
//!                            └─► maps:   node_threshold[node], dev_home_node[dev_t]
//!                            └─► DeviceTable: the node each disk's rows are reported against
//! ```
//!
//! **One locality rule.** A request is *local* when it was submitted on its
//! disk's *local node* ([`DeviceHome::run_node`]), the node its I/O-bound users
//! are placed on:
//! - the disk's own node when that node has CPUs;
//! - else the nearest node with CPUs (a memory-only node hosting a PCIe root:
//!   no CPU can be nearer);
//! - on a machine with one node, that node even when sysfs names none (there is
//!   nothing remote);
//! - otherwise none: the disk's requests are neither local nor remote, and its
//!   users are not placed.
//!
//! The scheduler (placement and its `dev_home_node` map), `observe`/`top` (their
//! `dev_home_node` map), the reports ([`Plan::device_table`]), the controller
//! and `profile` all take it from here.
//!
//! Pure, so odd machines are unit-tested here: CPU-less nodes, devices on
//! them or with an unknown node, one node, too many CPUs or nodes.

use anyhow::{bail, Result};

use crate::devt::{DevT, DeviceInfo, DeviceTable};
use crate::Topology;

/// `ESN_MAX_NODES` of bpf/intf.h (the binary asserts they agree at compile time).
pub const MAX_NODES: usize = 64;
/// `ESN_MAX_CPUS` of bpf/intf.h.
pub const MAX_CPUS: usize = 4096;
/// `ESN_NO_NODE` of bpf/intf.h: an empty `spill_order` slot.
pub const NO_NODE: u8 = 0xff;

/// A whole disk BPF should attribute I/O to, with the node its I/O-bound
/// users are placed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHome {
    pub name: String,
    pub dev: DevT,
    /// A multipath head's path disks, where its requests are issued.
    pub paths: Vec<String>,
    /// The device's own node (on a one-node machine where sysfs names none,
    /// that node).
    pub node: u32,
    /// Its local node: where its users run and its requests count as local.
    /// `node`, or the nearest node with CPUs when `node` has none.
    pub run_node: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub nr_nodes: u32,
    pub cpu_node: Vec<u8>,
    pub node_has_cpus: Vec<bool>,
    /// For each node id, the other nodes with CPUs, nearest first.
    pub spill_order: Vec<Vec<u8>>,
    /// Online CPUs per node id.
    pub node_cpus: Vec<u32>,
    /// Slots per node id (0 for nodes without CPUs).
    pub thresholds: Vec<u32>,
    /// The disks with a local node.
    pub devices: Vec<DeviceHome>,
    /// Devices left out, with the reason, for the log.
    pub skipped: Vec<String>,
}

impl Plan {
    /// `threshold`: the operator's fixed slots per node; `None` gives each
    /// node its number of online CPUs.
    pub fn new(topo: &Topology, threshold: Option<u32>) -> Result<Plan> {
        let nr_nodes = topo.nodes.iter().map(|n| n.id + 1).max().unwrap_or(1);
        if nr_nodes as usize > MAX_NODES {
            bail!(
                "this machine has NUMA node id {} but scx_esn supports ids below {MAX_NODES}; \
                 please report the machine's topology (scx_esn topology --json)",
                nr_nodes - 1
            );
        }
        if topo.nr_cpu_ids as usize > MAX_CPUS {
            bail!(
                "this machine has {} possible CPUs but scx_esn supports {MAX_CPUS}; \
                 please report the machine's topology (scx_esn topology --json)",
                topo.nr_cpu_ids
            );
        }
        if topo.nodes.iter().all(|n| n.cpus.is_empty()) {
            bail!("no NUMA node has an online CPU: is /sys/devices/system/node readable?");
        }

        let mut cpu_node = vec![0u8; topo.nr_cpu_ids as usize];
        for (cpu, node) in topo.cpu_to_node().into_iter().enumerate() {
            if let (Some(slot), Some(node)) = (cpu_node.get_mut(cpu), node) {
                *slot = node as u8;
            }
        }

        let mut node_has_cpus = vec![false; nr_nodes as usize];
        let mut spill_order = vec![Vec::new(); nr_nodes as usize];
        let mut node_cpus = vec![0u32; nr_nodes as usize];
        let mut thresholds = vec![0u32; nr_nodes as usize];
        for node in &topo.nodes {
            let id = node.id as usize;
            node_has_cpus[id] = !node.cpus.is_empty();
            node_cpus[id] = node.cpus.len() as u32;
            spill_order[id] = topo
                .spill_order(node.id)
                .into_iter()
                .map(|n| n as u8)
                .collect();
            if node_has_cpus[id] {
                thresholds[id] = threshold.unwrap_or(node.cpus.len() as u32);
            }
        }

        let only_node = match topo.nodes.as_slice() {
            [only] => Some(only.id),
            _ => None,
        };
        let mut devices = Vec::new();
        let mut skipped = Vec::new();
        for dev in &topo.devices {
            let Some(node) = dev.home_node.or(only_node) else {
                skipped.push(format!(
                    "{}: home node unknown ({})",
                    dev.name, dev.node_source
                ));
                continue;
            };
            let run_node = if node_has_cpus.get(node as usize).copied().unwrap_or(false) {
                Some(node)
            } else {
                spill_order
                    .get(node as usize)
                    .and_then(|order| order.first())
                    .map(|&n| n as u32)
            };
            match run_node {
                Some(run_node) => devices.push(DeviceHome {
                    name: dev.name.clone(),
                    dev: DevT::new(dev.major, dev.minor),
                    paths: dev.paths.clone(),
                    node,
                    run_node,
                }),
                None => skipped.push(format!("{}: node {node} has no CPUs nearby", dev.name)),
            }
        }

        Ok(Plan {
            nr_nodes,
            cpu_node,
            node_has_cpus,
            spill_order,
            node_cpus,
            thresholds,
            devices,
            skipped,
        })
    }

    /// `spill_order` as the fixed BPF array row for `node`.
    pub fn spill_row(&self, node: usize) -> [u8; MAX_NODES] {
        let mut row = [NO_NODE; MAX_NODES];
        if let Some(order) = self.spill_order.get(node) {
            for (slot, &n) in row.iter_mut().zip(order) {
                *slot = n;
            }
        }
        row
    }

    /// The disk's local node (see the module doc), `None` when it has none.
    pub fn local_node(&self, disk: &str) -> Option<u32> {
        self.devices
            .iter()
            .find(|d| d.name == disk)
            .map(|d| d.run_node)
    }

    /// Every disk of `topo` (partitions fold into them), with its local node:
    /// the table reports name disks by and count locality against.
    pub fn device_table(&self, topo: &Topology) -> DeviceTable {
        topo.devices
            .iter()
            .map(|d| DeviceInfo {
                name: d.name.clone(),
                dev: DevT::new(d.major, d.minor),
                node: self.local_node(&d.name),
                partitions: d
                    .partitions
                    .iter()
                    .map(|p| DevT::new(p.major, p.minor))
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockDevice, DeviceKind, Node, Partition};

    fn node(id: u32, cpus: &[u32], distances: &[(u32, u32)]) -> Node {
        Node {
            id,
            cpus: cpus.to_vec(),
            distances: distances.to_vec(),
        }
    }

    fn disk(name: &str, major: u32, minor: u32, home: Option<u32>) -> BlockDevice {
        BlockDevice {
            name: name.into(),
            major,
            minor,
            kind: DeviceKind::Nvme,
            home_node: home,
            node_source: "test".into(),
            controllers: vec![],
            partitions: vec![],
            paths: vec![],
        }
    }

    fn topo(nodes: Vec<Node>, nr_cpu_ids: u32, devices: Vec<BlockDevice>) -> Topology {
        let online_cpus = nodes.iter().flat_map(|n| n.cpus.clone()).collect();
        Topology {
            nodes,
            online_cpus,
            nr_cpu_ids,
            devices,
        }
    }

    fn two_nodes() -> Topology {
        topo(
            vec![
                node(0, &[0, 1], &[(0, 10), (1, 20)]),
                node(1, &[2, 3], &[(0, 20), (1, 10)]),
            ],
            4,
            vec![disk("nvme0n1", 259, 0, Some(1)), disk("vda", 254, 0, None)],
        )
    }

    #[test]
    fn two_nodes_with_nvme_on_node_1() {
        let plan = Plan::new(&two_nodes(), None).unwrap();
        assert_eq!(plan.nr_nodes, 2);
        assert_eq!(plan.cpu_node, vec![0, 0, 1, 1]);
        assert_eq!(plan.thresholds, vec![2, 2]);
        assert_eq!(plan.node_cpus, vec![2, 2]);
        assert_eq!(plan.spill_order, vec![vec![1], vec![0]]);
        assert_eq!(plan.devices.len(), 1);
        assert_eq!(plan.devices[0].dev, DevT(259 << 20));
        assert_eq!(plan.devices[0].run_node, 1);
        assert_eq!(plan.skipped.len(), 1);
        assert!(plan.skipped[0].starts_with("vda"));
        let row = plan.spill_row(1);
        assert_eq!(row[0], 0);
        assert!(row[1..].iter().all(|&n| n == NO_NODE));
    }

    /// `two_nodes` with a memory-only node 2, nearer node 1 than node 0.
    fn two_nodes_and_a_memory_node() -> Topology {
        let mut t = two_nodes();
        t.nodes.push(node(2, &[], &[(0, 30), (1, 15), (2, 10)]));
        t.nodes[0].distances.push((2, 30));
        t.nodes[1].distances.push((2, 15));
        t
    }

    #[test]
    fn fixed_threshold_applies_to_nodes_with_cpus_only() {
        let mut t = two_nodes_and_a_memory_node();
        t.devices.push(disk("nvme1n1", 259, 1, Some(2)));
        let plan = Plan::new(&t, Some(3)).unwrap();
        assert_eq!(plan.thresholds, vec![3, 3, 0]);
        assert!(!plan.node_has_cpus[2]);
        // the device on the memory-only node runs its users on the nearest node
        let d = plan.devices.iter().find(|d| d.name == "nvme1n1").unwrap();
        assert_eq!((d.node, d.run_node), (2, 1));
    }

    #[test]
    fn single_node_machine() {
        let t = topo(vec![node(0, &[0, 1, 2], &[(0, 10)])], 3, vec![]);
        let plan = Plan::new(&t, None).unwrap();
        assert_eq!(plan.nr_nodes, 1);
        assert_eq!(plan.thresholds, vec![3]);
        assert!(plan.spill_order[0].is_empty());
        assert!(plan.devices.is_empty());
    }

    #[test]
    fn one_node_machine_makes_every_disk_local_to_it() {
        // sysfs names no node for the disk (a virtio disk, numa_node -1)
        let t = topo(
            vec![node(0, &[0, 1], &[(0, 10)])],
            2,
            vec![disk("vda", 254, 0, None)],
        );
        let plan = Plan::new(&t, None).unwrap();
        assert_eq!(plan.local_node("vda"), Some(0));
        assert!(plan.skipped.is_empty());
        let table = plan.device_table(&t);
        assert_eq!(table.by_name("vda").unwrap().node, Some(0));
    }

    #[test]
    fn the_report_and_bpf_share_the_local_node() {
        // nvme0n1 on node 1; nvme1n1 on memory-only node 2 (nearest: node 1);
        // vda unknown on a machine with several nodes
        let mut t = two_nodes_and_a_memory_node();
        let mut on_memory_node = disk("nvme1n1", 259, 2, Some(2));
        on_memory_node.partitions.push(Partition {
            name: "nvme1n1p1".into(),
            major: 259,
            minor: 3,
        });
        t.devices.push(on_memory_node);
        let plan = Plan::new(&t, None).unwrap();
        let table = plan.device_table(&t);
        for dev in &plan.devices {
            // what BPF's dev_home_node holds is what the report shows
            assert_eq!(table.lookup(dev.dev).unwrap().node, Some(dev.run_node));
        }
        assert_eq!(table.by_name("nvme1n1").unwrap().node, Some(1));
        assert_eq!(table.name_of(DevT::new(259, 3)), "nvme1n1");
        assert_eq!(table.by_name("vda").unwrap().node, None);
        assert_eq!(plan.local_node("vda"), None);
        assert_eq!(table.len(), 3);
    }

    #[test]
    fn offline_cpu_keeps_default_node_and_is_not_counted() {
        // cpu 1 offline: absent from node 0's online list, still a valid id
        let t = topo(vec![node(0, &[0, 2], &[(0, 10)])], 3, vec![]);
        let plan = Plan::new(&t, None).unwrap();
        assert_eq!(plan.cpu_node.len(), 3);
        assert_eq!(plan.thresholds, vec![2]);
    }

    #[test]
    fn refuses_machines_beyond_the_bpf_limits() {
        let t = topo(vec![node(70, &[0], &[(70, 10)])], 1, vec![]);
        let err = Plan::new(&t, None).unwrap_err().to_string();
        assert!(err.contains("node id 70"), "{err}");
        let t = topo(vec![node(0, &[0], &[(0, 10)])], MAX_CPUS as u32 + 1, vec![]);
        let err = Plan::new(&t, None).unwrap_err().to_string();
        assert!(err.contains("possible CPUs"), "{err}");
    }

    #[test]
    fn no_cpus_anywhere_is_an_error() {
        let t = topo(vec![node(0, &[], &[(0, 10)])], 1, vec![]);
        assert!(Plan::new(&t, None).is_err());
    }
}
