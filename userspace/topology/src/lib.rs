//! The machine's NUMA and block-device topology, read from sysfs into a plain model.
//!
//! Everything takes the sysfs root as a path (normally `/sys`), so tests can build a
//! fake tree in a temporary directory. Discovery never panics and degrades rather than
//! fails on unusual machines: it errors only when `devices/system/cpu/online` cannot be
//! read or parsed, because without the online CPUs there is nothing to schedule on.
//!
//! Where each fact comes from (paths relative to the sysfs root):
//!
//! | fact | source | when it is missing |
//! |---|---|---|
//! | online CPUs | `devices/system/cpu/online` | error |
//! | `nr_cpu_ids` | highest id in `devices/system/cpu/possible`, plus one | highest online id, plus one |
//! | nodes | `devices/system/node/node<N>/` directories (memory-only nodes included) | one node 0 with every online CPU |
//! | a node's CPUs | `node<N>/cpulist` ∩ online | the CPUs go to the lowest node (see [`Node::cpus`]) |
//! | distances | `node<N>/distance`, one column per node in `node/online`, ascending | 10 to itself, 20 to others (the kernel's defaults) |
//! | disks | `block/<disk>/dev`; partitions are subdirectories with a `partition` file | disk left out |
//! | NVMe home node | `class/nvme/<ctrl>/device/numa_node` (the PCI function), then `class/nvme/<ctrl>/numa_node` | unknown |
//! | multipath head's home node | the common node of its path disks' controllers | unknown |
//! | other disk's home node | `block/<disk>/device/numa_node`, else the nearest ancestor device with a `numa_node` | unknown |
//! | SMT siblings online ([`smt_active`]) | `devices/system/cpu/smt/active` | assumed on |
//!
//! A `numa_node` of -1, a value that is not a number, or a node with no directory all
//! make the home node unknown (`None`); `node_source` says which and why.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

mod block;
mod cpulist;
pub mod devt;
mod fabrics;
mod nodes;
pub mod plan;
mod sysfs;

pub use cpulist::{format_cpulist, parse_cpulist};
pub use nodes::{LOCAL_DISTANCE, REMOTE_DISTANCE};

/// Whether the kernel has SMT siblings online (its `sched_smt_active()`), which
/// decides whether asking its idle pick for a whole idle core means anything. A
/// kernel without `CONFIG_HOTPLUG_SMT` has no such file: assumed on, the answer
/// that only costs a second search where it is wrong.
pub fn smt_active(sysfs_root: &Path) -> bool {
    sysfs::read_trimmed(&sysfs_root.join("devices/system/cpu/smt/active")).is_none_or(|s| s != "0")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Sorted by id; includes CPU-less (memory-only) nodes.
    pub nodes: Vec<Node>,
    /// From `devices/system/cpu/online`, sorted.
    pub online_cpus: Vec<u32>,
    /// Highest possible CPU id plus one: the length of per-CPU tables.
    pub nr_cpu_ids: u32,
    /// Whole disks only (partitions are inside them, multipath path disks are left
    /// out), sorted by name.
    pub devices: Vec<BlockDevice>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub id: u32,
    /// Online CPUs of this node, sorted. Every online CPU is in exactly one node: one
    /// that no node lists (hotplug race, unreadable cpulist) is put in the
    /// lowest-numbered node, and one listed twice stays in the lower-numbered node.
    pub cpus: Vec<u32>,
    /// (node id, distance) for every node, this one included, in node id order.
    pub distances: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// An NVMe namespace disk reached through one controller.
    Nvme,
    /// The disk of an NVMe native-multipath namespace head; I/O to it goes down any of
    /// its paths, which may be on different controllers and nodes.
    NvmeMultipathHead,
    Other,
}

impl DeviceKind {
    /// The same spelling as the JSON form.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Nvme => "nvme",
            DeviceKind::NvmeMultipathHead => "nvme_multipath_head",
            DeviceKind::Other => "other",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockDevice {
    /// Kernel name: "nvme0n1", "vda", "sda".
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub kind: DeviceKind,
    /// The node whose CPUs are nearest the hardware; `None` when unknown.
    pub home_node: Option<u32>,
    /// For humans: the file that gave `home_node`, or why it is unknown.
    pub node_source: String,
    /// NVMe controllers serving this disk ("nvme0"); empty for other disks.
    pub controllers: Vec<String>,
    /// In partition-number order.
    pub partitions: Vec<Partition>,
    /// A multipath head's path disks (`nvme<S>c<C>n<N>`: hidden, their
    /// numbers in no sysfs file): its requests are issued on them.
    #[serde(default)]
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub name: String,
    pub major: u32,
    pub minor: u32,
}

impl Topology {
    /// Reads the topology under `sysfs_root` (normally `/sys`).
    pub fn discover(sysfs_root: &Path) -> Result<Topology> {
        let cpu_dir = sysfs_root.join("devices/system/cpu");
        let online_path = cpu_dir.join("online");
        let text = fs::read_to_string(&online_path).with_context(|| {
            format!(
                "cannot read {}, the list of online CPUs; is sysfs mounted at {}? \
                 (mount it with `mount -t sysfs sysfs {}`)",
                online_path.display(),
                sysfs_root.display(),
                sysfs_root.display()
            )
        })?;
        let online_cpus = parse_cpulist(&text).with_context(|| {
            format!(
                "cannot parse {}; it should hold a CPU list such as \"0-3,8\"",
                online_path.display()
            )
        })?;
        if online_cpus.is_empty() {
            bail!(
                "{} lists no online CPUs; is {} a real sysfs tree?",
                online_path.display(),
                sysfs_root.display()
            );
        }

        let nodes = nodes::read_nodes(sysfs_root, &online_cpus);

        // An unreadable `possible` is survivable: per-CPU tables only need to cover
        // the CPUs we know of.
        let possible = sysfs::read_trimmed(&cpu_dir.join("possible"))
            .and_then(|s| parse_cpulist(&s).ok())
            .unwrap_or_default();
        let max_cpu = possible
            .iter()
            .chain(&online_cpus)
            .chain(nodes.iter().flat_map(|n| &n.cpus))
            .copied()
            .max()
            .unwrap_or(0);

        let node_ids: Vec<u32> = nodes.iter().map(|n| n.id).collect();
        let devices = block::read_devices(sysfs_root, &node_ids);

        Ok(Topology {
            nodes,
            online_cpus,
            nr_cpu_ids: max_cpu + 1,
            devices,
        })
    }

    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Distance from node `from` to node `to`, as the firmware reports it (10 = local).
    pub fn distance(&self, from: u32, to: u32) -> Option<u32> {
        self.node(from)?
            .distances
            .iter()
            .find(|(id, _)| *id == to)
            .map(|(_, d)| *d)
    }

    /// Other nodes that have at least one online CPU, nearest first (by distance, then
    /// id); excludes `from`. Nodes with no known distance from `from` come last.
    pub fn spill_order(&self, from: u32) -> Vec<u32> {
        let mut order: Vec<(u32, u32)> = self
            .nodes
            .iter()
            .filter(|n| n.id != from && !n.cpus.is_empty())
            .map(|n| (self.distance(from, n.id).unwrap_or(u32::MAX), n.id))
            .collect();
        order.sort_unstable();
        order.into_iter().map(|(_, id)| id).collect()
    }

    /// Node of each CPU, indexed by CPU id, `nr_cpu_ids` long. Online CPUs always map
    /// to a node (see [`Node::cpus`] for CPUs no node lists); offline and impossible
    /// ids are `None`.
    pub fn cpu_to_node(&self) -> Vec<Option<u32>> {
        let mut map = vec![None; self.nr_cpu_ids as usize];
        for node in &self.nodes {
            for &cpu in &node.cpus {
                if let Some(slot) = map.get_mut(cpu as usize) {
                    *slot = Some(node.id);
                }
            }
        }
        map
    }

    /// The whole disk that device number `major:minor` is, or is a partition of.
    pub fn disk_of(&self, major: u32, minor: u32) -> Option<&BlockDevice> {
        self.devices.iter().find(|d| {
            (d.major, d.minor) == (major, minor)
                || d.partitions
                    .iter()
                    .any(|p| (p.major, p.minor) == (major, minor))
        })
    }

    /// NVMe disks, multipath heads included.
    pub fn nvme_devices(&self) -> impl Iterator<Item = &BlockDevice> {
        self.devices.iter().filter(|d| d.kind != DeviceKind::Other)
    }

    /// A human-readable report: nodes with CPUs and distances, then disks.
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "online CPUs {} (nr_cpu_ids {})\n\n",
            format_cpulist(&self.online_cpus),
            self.nr_cpu_ids
        );

        let cpus: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                if n.cpus.is_empty() {
                    "-".to_string()
                } else {
                    format_cpulist(&n.cpus)
                }
            })
            .collect();
        let cpu_w = cpus.iter().map(String::len).max().unwrap_or(0).max(4);
        let col_w = self
            .nodes
            .iter()
            .flat_map(|n| {
                n.distances
                    .iter()
                    .map(|(id, d)| id.max(d).to_string().len())
            })
            .max()
            .unwrap_or(0)
            .max(3);
        let header: String = self
            .nodes
            .iter()
            .map(|n| format!(" {:>col_w$}", n.id))
            .collect();
        out.push_str(&format!(
            "{:<4}  {:<cpu_w$}  distance to{header}\n",
            "node", "cpus"
        ));
        for (node, cpus) in self.nodes.iter().zip(&cpus) {
            let row: String = self
                .nodes
                .iter()
                .map(|other| {
                    let d = self
                        .distance(node.id, other.id)
                        .map_or("?".to_string(), |d| d.to_string());
                    format!(" {d:>col_w$}")
                })
                .collect();
            out.push_str(&format!("{:<4}  {cpus:<cpu_w$}  {:11}{row}\n", node.id, ""));
        }

        out.push('\n');
        if self.devices.is_empty() {
            out.push_str("no block devices\n");
            return out;
        }
        let rows: Vec<[String; 6]> = self
            .devices
            .iter()
            .map(|d| {
                let parts: Vec<&str> = d.partitions.iter().map(|p| p.name.as_str()).collect();
                [
                    d.name.clone(),
                    format!("{}:{}", d.major, d.minor),
                    d.kind.as_str().to_string(),
                    d.home_node.map_or("unknown".to_string(), |n| n.to_string()),
                    or_dash(d.controllers.join(",")),
                    or_dash(parts.join(",")),
                ]
            })
            .collect();
        let titles = [
            "device",
            "maj:min",
            "kind",
            "home",
            "controllers",
            "partitions",
        ];
        let widths: Vec<usize> = (0..titles.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].len())
                    .chain([titles[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[&str]| -> String {
            let joined: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            format!("{}\n", joined.join("  ").trim_end())
        };
        out.push_str(&line(&titles));
        for r in &rows {
            let cells: Vec<&str> = r.iter().map(String::as_str).collect();
            out.push_str(&line(&cells));
        }

        out.push_str("\nhome node sources:\n");
        for d in &self.devices {
            out.push_str(&format!("  {}: {}\n", d.name, d.node_source));
        }
        out
    }
}

fn or_dash(s: String) -> String {
    if s.is_empty() {
        "-".to_string()
    } else {
        s
    }
}
