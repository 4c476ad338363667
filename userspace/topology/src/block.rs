//! Block devices: whole disks, their partitions, and the NUMA node each disk's
//! hardware hangs off.
//!
//! NVMe native multipath, as the kernel lays it out (drivers/nvme/host/core.c,
//! multipath.c; relied on here):
//! - the disk users see, `nvme<S>n<N>`, is the namespace *head*; it is registered with
//!   the subsystem device as parent, so `/sys/block/nvme<S>n<N>/device` points at
//!   `.../nvme-subsystem/nvme-subsys<S>` and no PCI device is above it;
//! - each path is a hidden disk `nvme<S>c<C>n<N>` (C = controller instance) whose
//!   parent is controller `nvme<C>`; hidden disks get no /dev node and are not
//!   separate devices for our purposes;
//! - recent kernels (6.15 on) give the head a `multipath/` directory with one link
//!   per path disk; the first multipath kernels (4.15 era) linked the paths from the
//!   head's `slaves/`; in between, the naming convention above is the only tie. All
//!   three are consulted and merged.
//!
//! Without multipath (nvme_core.multipath=N, or a controller that cannot share
//! namespaces) the disk's `device` is the controller itself.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::fabrics::{self, FabricsHome};
use crate::sysfs::{
    base_name, dir_names, read_dev, read_numa_node, read_trimmed, resolve, NumaNodeFile,
};
use crate::{BlockDevice, DeviceKind, Partition};

/// Ancestors examined when looking for a device's `numa_node`; real chains (disk →
/// transport → PCI function → bridges) are well under this.
const MAX_WALK: usize = 16;

/// Reads every whole disk under `root/block`. `node_ids` are the nodes that exist; a
/// `numa_node` naming any other node is treated as unknown rather than trusted.
pub(crate) fn read_devices(root: &Path, node_ids: &[u32]) -> Vec<BlockDevice> {
    let block = root.join("block");
    let names = dir_names(&block);
    let ctx = Ctx {
        root,
        procfs: root.join("../proc"),
        node_ids,
        disk_names: &names,
    };
    let mut devices: Vec<BlockDevice> = names
        .iter()
        .filter(|name| !is_hidden(&block.join(name), name))
        .filter_map(|name| ctx.read_disk(name))
        .collect();
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    devices
}

fn is_hidden(dir: &Path, name: &str) -> bool {
    matches!(parse_nvme_name(name), Some(NvmeName::Path { .. }))
        || read_trimmed(&dir.join("hidden")).as_deref() == Some("1")
}

struct Ctx<'a> {
    root: &'a Path,
    /// The procfs beside the sysfs root (`<root>/../proc`): the routing
    /// tables for nvme-tcp.
    procfs: PathBuf,
    node_ids: &'a [u32],
    disk_names: &'a [String],
}

/// Where a disk's home node came from.
struct Home {
    node: Option<u32>,
    source: String,
}

impl Home {
    fn unknown(why: impl Into<String>) -> Home {
        Home {
            node: None,
            source: format!("unknown: {}", why.into()),
        }
    }
}

impl Ctx<'_> {
    fn read_disk(&self, name: &str) -> Option<BlockDevice> {
        let dir = self.root.join("block").join(name);
        // Without its numbers a disk cannot be matched to any I/O; leave it out.
        let (major, minor) = read_dev(&dir.join("dev"))?;
        let parent = resolve(&dir.join("device"));
        let kind = classify(name, &dir, parent.as_deref());
        let (home, controllers) = match kind {
            DeviceKind::Nvme => self.nvme_home(parent.as_deref()),
            DeviceKind::NvmeMultipathHead => self.head_home(name, &dir),
            DeviceKind::Other => (self.other_home(&dir), Vec::new()),
        };
        let paths = match kind {
            DeviceKind::NvmeMultipathHead => self.head_paths(name, &dir),
            _ => Vec::new(),
        };
        Some(BlockDevice {
            name: name.to_string(),
            major,
            minor,
            kind,
            home_node: home.node,
            node_source: home.source,
            controllers,
            partitions: read_partitions(&dir),
            paths,
        })
    }

    /// A non-multipath NVMe disk: its `device` is the controller.
    fn nvme_home(&self, controller: Option<&Path>) -> (Home, Vec<String>) {
        let Some(ctrl_dir) = controller else {
            return (
                Home::unknown("no device link to an NVMe controller"),
                Vec::new(),
            );
        };
        let ctrl = base_name(ctrl_dir).unwrap_or_default();
        (self.controller_home(&ctrl, ctrl_dir), vec![ctrl])
    }

    /// The controller's PCI function knows the node (fabrics controllers have none),
    /// then the controller's own `numa_node` (nvme-rdma copies its HCA's node there;
    /// nvme-tcp leaves -1).
    /// An nvme-tcp controller (neither has a node) goes by the NIC its
    /// target is reached through (`fabrics`).
    fn controller_home(&self, ctrl: &str, resolved: &Path) -> Home {
        let class_dir = self.root.join("class/nvme").join(ctrl);
        let base = if class_dir.is_dir() {
            class_dir
        } else {
            resolved.to_path_buf()
        };
        let home = self.first_numa_node(&[base.join("device/numa_node"), base.join("numa_node")]);
        if home.node.is_some() {
            return home;
        }
        match fabrics::fabrics_home(self.root, &self.procfs, &base, self.node_ids) {
            Some(FabricsHome { node: Ok(n), via }) => Home {
                node: Some(n),
                source: via,
            },
            Some(FabricsHome { node: Err(why), .. }) => Home::unknown(why),
            None => home,
        }
    }

    fn head_home(&self, head: &str, dir: &Path) -> (Home, Vec<String>) {
        let paths = self.head_paths(head, dir);
        if paths.is_empty() {
            return (
                Home::unknown("multipath head with no path disks found"),
                Vec::new(),
            );
        }
        let mut controllers = BTreeSet::new();
        let mut per_path = Vec::new();
        for path in &paths {
            let ctrl_dir = resolve(&self.root.join("block").join(path).join("device"))
                .or_else(|| resolve(&dir.join("multipath").join(path).join("device")))
                .or_else(|| match parse_nvme_name(path) {
                    Some(NvmeName::Path { ctrl, .. }) => {
                        resolve(&self.root.join(format!("class/nvme/nvme{ctrl}")))
                    }
                    _ => None,
                });
            let home = match &ctrl_dir {
                Some(cd) => {
                    let ctrl = base_name(cd).unwrap_or_default();
                    controllers.insert(ctrl.clone());
                    self.controller_home(&ctrl, cd)
                }
                None => Home::unknown("path has no controller link"),
            };
            per_path.push((path.clone(), home));
        }

        let nodes: BTreeSet<Option<u32>> = per_path.iter().map(|(_, h)| h.node).collect();
        let details: Vec<String> = per_path
            .iter()
            .map(|(p, h)| format!("{p}: {}", h.source.trim_start_matches("unknown: ")))
            .collect();
        let home = match (nodes.len(), nodes.first()) {
            (1, Some(Some(n))) => Home {
                node: Some(*n),
                source: format!("all paths on node {n} ({})", details.join("; ")),
            },
            _ => {
                // The kernel may send each I/O down any of these paths, so no single
                // node is the device's home.
                let mut list: Vec<String> = nodes.iter().flatten().map(u32::to_string).collect();
                if nodes.contains(&None) {
                    list.push("unknown".to_string());
                }
                Home::unknown(format!(
                    "paths on nodes {} ({})",
                    list.join(","),
                    details.join("; ")
                ))
            }
        };
        (home, controllers.into_iter().collect())
    }

    /// Path disk names of a head, from every place the kernel has ever recorded them.
    fn head_paths(&self, head: &str, dir: &Path) -> Vec<String> {
        let is_path = |n: &String| matches!(parse_nvme_name(n), Some(NvmeName::Path { .. }));
        let mut paths: BTreeSet<String> = dir_names(&dir.join("multipath"))
            .into_iter()
            .chain(dir_names(&dir.join("slaves")))
            .filter(is_path)
            .collect();
        if let Some(NvmeName::Namespace { subsys, ns }) = parse_nvme_name(head) {
            paths.extend(
                self.disk_names
                    .iter()
                    .filter(|n| {
                        matches!(parse_nvme_name(n),
                    Some(NvmeName::Path { subsys: s, ns: n, .. }) if s == subsys && n == ns)
                    })
                    .cloned(),
            );
        }
        paths.into_iter().collect()
    }

    /// Any other disk: the nearest device above it that has a `numa_node` file decides.
    fn other_home(&self, dir: &Path) -> Home {
        let direct = dir.join("device/numa_node");
        if read_numa_node(&direct) != NumaNodeFile::Missing {
            return self.first_numa_node(&[direct]);
        }
        let Some(real) = resolve(dir) else {
            return Home::unknown("disk directory does not resolve");
        };
        let root = resolve(self.root).unwrap_or_else(|| self.root.to_path_buf());
        if real.starts_with(root.join("devices/virtual")) {
            return Home::unknown("virtual device, no hardware parent");
        }
        let devices = root.join("devices");
        for ancestor in real.ancestors().skip(1).take(MAX_WALK) {
            if !ancestor.starts_with(&devices) || ancestor == devices {
                break;
            }
            let file = ancestor.join("numa_node");
            if read_numa_node(&file) != NumaNodeFile::Missing {
                // The closest device that has an opinion is authoritative; a -1 there
                // means the firmware did not say, and further up knows no better.
                return self.first_numa_node(&[file]);
            }
        }
        Home::unknown("no numa_node file on the device or its parents")
    }

    /// The first candidate naming an existing node wins; otherwise say what each said.
    fn first_numa_node(&self, candidates: &[PathBuf]) -> Home {
        let mut said = Vec::new();
        for file in candidates {
            let shown = file.display();
            match read_numa_node(file) {
                NumaNodeFile::Node(n) if self.node_ids.contains(&n) => {
                    return Home {
                        node: Some(n),
                        source: shown.to_string(),
                    }
                }
                NumaNodeFile::Node(n) => said.push(format!("{shown} names absent node {n}")),
                NumaNodeFile::NoNode => said.push(format!("{shown} is -1")),
                NumaNodeFile::Garbage(s) => said.push(format!("{shown} holds {s:?}")),
                NumaNodeFile::Missing => {}
            }
        }
        if said.is_empty() {
            Home::unknown("no numa_node file")
        } else {
            Home::unknown(said.join(", "))
        }
    }
}

fn classify(name: &str, dir: &Path, parent: Option<&Path>) -> DeviceKind {
    let parent_name = parent.and_then(base_name).unwrap_or_default();
    let grandparent_name = parent
        .and_then(Path::parent)
        .and_then(base_name)
        .unwrap_or_default();
    if dir.join("multipath").is_dir() || parent_name.starts_with("nvme-subsys") {
        DeviceKind::NvmeMultipathHead
    } else if parse_nvme_name(name).is_some() || grandparent_name == "nvme" {
        DeviceKind::Nvme
    } else {
        DeviceKind::Other
    }
}

/// Partitions are subdirectories with a `partition` file (their number); listed in
/// partition-number order so "p10" follows "p9".
fn read_partitions(dir: &Path) -> Vec<Partition> {
    let mut parts: Vec<(u32, Partition)> = dir_names(dir)
        .into_iter()
        .filter_map(|name| {
            let pdir = dir.join(&name);
            let number = read_trimmed(&pdir.join("partition"))?
                .parse()
                .unwrap_or(u32::MAX);
            let (major, minor) = read_dev(&pdir.join("dev"))?;
            Some((number, Partition { name, major, minor }))
        })
        .collect();
    parts.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    parts.into_iter().map(|(_, p)| p).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NvmeName {
    /// `nvme<subsys-or-ctrl>n<ns>`: a head, or a plain namespace disk.
    Namespace { subsys: u32, ns: u32 },
    /// `nvme<subsys>c<ctrl>n<ns>`: one path of a multipath head.
    Path { subsys: u32, ctrl: u32, ns: u32 },
}

fn parse_nvme_name(name: &str) -> Option<NvmeName> {
    fn number(s: &str) -> Option<(u32, &str)> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        if end == 0 {
            return None;
        }
        Some((s[..end].parse().ok()?, &s[end..]))
    }
    let (subsys, rest) = number(name.strip_prefix("nvme")?)?;
    let (ctrl, rest) = match rest.strip_prefix('c') {
        Some(r) => {
            let (c, r) = number(r)?;
            (Some(c), r)
        }
        None => (None, rest),
    };
    let (ns, rest) = number(rest.strip_prefix('n')?)?;
    if !rest.is_empty() {
        return None;
    }
    Some(match ctrl {
        Some(ctrl) => NvmeName::Path { subsys, ctrl, ns },
        None => NvmeName::Namespace { subsys, ns },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_names() {
        assert_eq!(
            parse_nvme_name("nvme0n1"),
            Some(NvmeName::Namespace { subsys: 0, ns: 1 })
        );
        assert_eq!(
            parse_nvme_name("nvme12c3n45"),
            Some(NvmeName::Path {
                subsys: 12,
                ctrl: 3,
                ns: 45
            })
        );
        for not in [
            "nvme0",
            "nvme0n1p1",
            "nvmen1",
            "nvme0c1",
            "vda",
            "nvme0n",
            "nvme-subsys0",
        ] {
            assert_eq!(parse_nvme_name(not), None, "{not}");
        }
    }
}
