//! Discovery against fake sysfs trees shaped like the kernel's, with real symlinks
//! where sysfs has them.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use esn_topology::{smt_active, DeviceKind, Node, Partition, Topology};
use tempfile::TempDir;

struct FakeSysfs {
    dir: TempDir,
}

impl FakeSysfs {
    /// A tree with just the CPU lists.
    fn new(online: &str, possible: &str) -> FakeSysfs {
        let fake = FakeSysfs {
            dir: TempDir::new().unwrap(),
        };
        fake.file("devices/system/cpu/online", &format!("{online}\n"));
        fake.file("devices/system/cpu/possible", &format!("{possible}\n"));
        fake
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn file(&self, rel: &str, contents: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, contents).unwrap();
    }

    fn mkdir(&self, rel: &str) {
        fs::create_dir_all(self.path(rel)).unwrap();
    }

    fn link(&self, rel_link: &str, rel_target: &str) {
        let l = self.path(rel_link);
        fs::create_dir_all(l.parent().unwrap()).unwrap();
        symlink(self.path(rel_target), l).unwrap();
    }

    fn node(&self, id: u32, cpulist: &str, distance: &str) {
        let d = format!("devices/system/node/node{id}");
        self.file(&format!("{d}/cpulist"), &format!("{cpulist}\n"));
        self.file(&format!("{d}/distance"), &format!("{distance}\n"));
    }

    fn node_online(&self, list: &str) {
        self.file("devices/system/node/online", &format!("{list}\n"));
    }

    fn discover(&self) -> Topology {
        Topology::discover(self.root()).unwrap()
    }

    /// A disk device directory at `dir`, linked from /sys/block, with `device` -> `parent`.
    fn disk(&self, name: &str, dir: &str, dev: &str, parent: Option<&str>) {
        self.file(&format!("{dir}/dev"), &format!("{dev}\n"));
        self.file(&format!("{dir}/hidden"), "0\n");
        if let Some(p) = parent {
            self.link(&format!("{dir}/device"), p);
        }
        self.link(&format!("block/{name}"), dir);
    }

    fn partition(&self, disk_dir: &str, name: &str, number: u32, dev: &str) {
        self.file(
            &format!("{disk_dir}/{name}/partition"),
            &format!("{number}\n"),
        );
        self.file(&format!("{disk_dir}/{name}/dev"), &format!("{dev}\n"));
    }

    /// A PCI function; `numa_node` None leaves the file out.
    fn pci(&self, func: &str, numa_node: Option<&str>) -> String {
        let dir = format!("devices/pci0000:00/{func}");
        self.mkdir(&dir);
        if let Some(n) = numa_node {
            self.file(&format!("{dir}/numa_node"), &format!("{n}\n"));
        }
        dir
    }

    /// A PCIe NVMe controller under a PCI function, registered in class/nvme.
    fn pcie_controller(&self, ctrl: &str, func: &str, numa_node: Option<&str>) -> String {
        let pci = self.pci(func, numa_node);
        let dir = format!("{pci}/nvme/{ctrl}");
        self.mkdir(&dir);
        self.link(&format!("{dir}/device"), &pci);
        self.link(&format!("class/nvme/{ctrl}"), &dir);
        dir
    }

    /// An NVMe-over-fabrics controller: no PCI device, only its own numa_node.
    fn fabrics_controller(&self, ctrl: &str, numa_node: &str) -> String {
        let ctl = "devices/virtual/nvme-fabrics/ctl";
        let dir = format!("{ctl}/{ctrl}");
        self.file(&format!("{dir}/numa_node"), &format!("{numa_node}\n"));
        self.link(&format!("{dir}/device"), ctl);
        self.link(&format!("class/nvme/{ctrl}"), &dir);
        dir
    }

    /// A namespace disk directly under a controller (no multipath).
    fn nvme_disk(&self, name: &str, ctrl_dir: &str, dev: &str) -> String {
        let dir = format!("{ctrl_dir}/{name}");
        self.disk(name, &dir, dev, Some(ctrl_dir));
        dir
    }

    /// A multipath head in subsystem `subsys` and its hidden path disks, one per
    /// (path disk name, controller dir). `links` adds the head's multipath/ directory.
    fn multipath_head(
        &self,
        head: &str,
        subsys: &str,
        dev: &str,
        paths: &[(&str, &str)],
        links: bool,
    ) {
        let subsys_dir = format!("devices/virtual/nvme-subsystem/{subsys}");
        let head_dir = format!("{subsys_dir}/{head}");
        self.disk(head, &head_dir, dev, Some(&subsys_dir));
        if links {
            self.mkdir(&format!("{head_dir}/multipath"));
        }
        for (i, (path, ctrl_dir)) in paths.iter().enumerate() {
            let path_dir = format!("{ctrl_dir}/{path}");
            self.file(&format!("{path_dir}/dev"), &format!("259:{}\n", 100 + i));
            self.file(&format!("{path_dir}/hidden"), "1\n");
            self.link(&format!("{path_dir}/device"), ctrl_dir);
            self.link(&format!("block/{path}"), &path_dir);
            if links {
                self.link(&format!("{head_dir}/multipath/{path}"), &path_dir);
            }
        }
    }
}

fn two_nodes() -> FakeSysfs {
    let fake = FakeSysfs::new("0-7", "0-7");
    fake.node_online("0-1");
    fake.node(0, "0-3", "10 21");
    fake.node(1, "4-7", "21 10");
    fake
}

fn names(topo: &Topology) -> Vec<&str> {
    topo.devices.iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn two_nodes_with_nvme_on_node_1_and_partitions() {
    let fake = two_nodes();
    let ctrl = fake.pcie_controller("nvme0", "0000:81:00.0", Some("1"));
    let disk = fake.nvme_disk("nvme0n1", &ctrl, "259:0");
    fake.partition(&disk, "nvme0n1p1", 1, "259:1");
    fake.partition(&disk, "nvme0n1p2", 2, "259:2");
    let topo = fake.discover();

    assert_eq!(
        topo.nodes,
        vec![
            Node {
                id: 0,
                cpus: vec![0, 1, 2, 3],
                distances: vec![(0, 10), (1, 21)]
            },
            Node {
                id: 1,
                cpus: vec![4, 5, 6, 7],
                distances: vec![(0, 21), (1, 10)]
            },
        ]
    );
    assert_eq!(topo.nr_cpu_ids, 8);
    assert_eq!(topo.distance(0, 1), Some(21));
    assert_eq!(topo.spill_order(0), vec![1]);
    assert_eq!(topo.spill_order(1), vec![0]);

    assert_eq!(names(&topo), vec!["nvme0n1"]);
    let d = &topo.devices[0];
    assert_eq!((d.major, d.minor), (259, 0));
    assert_eq!(d.kind, DeviceKind::Nvme);
    assert_eq!(d.home_node, Some(1));
    assert!(
        d.node_source.ends_with("class/nvme/nvme0/device/numa_node"),
        "{}",
        d.node_source
    );
    assert_eq!(d.controllers, vec!["nvme0"]);
    assert_eq!(
        d.partitions,
        vec![
            Partition {
                name: "nvme0n1p1".into(),
                major: 259,
                minor: 1
            },
            Partition {
                name: "nvme0n1p2".into(),
                major: 259,
                minor: 2
            },
        ]
    );
    assert_eq!(topo.nvme_devices().count(), 1);
}

#[test]
fn smt_is_off_only_when_the_kernel_says_so() {
    let fake = FakeSysfs::new("0-3", "0-3");
    assert!(smt_active(fake.root()), "no smt/active file: assumed on");
    fake.file("devices/system/cpu/smt/active", "0\n");
    assert!(!smt_active(fake.root()));
    fake.file("devices/system/cpu/smt/active", "1\n");
    assert!(smt_active(fake.root()));
}

#[test]
fn disk_of_finds_whole_disks_and_partitions() {
    let fake = two_nodes();
    let ctrl = fake.pcie_controller("nvme0", "0000:81:00.0", Some("1"));
    let disk = fake.nvme_disk("nvme0n1", &ctrl, "259:0");
    fake.partition(&disk, "nvme0n1p1", 1, "259:3");
    let pci = fake.pci("0000:00:1f.2", Some("0"));
    let sda = format!("{pci}/ata1/host0/target0:0:0/0:0:0:0/block/sda");
    fake.disk(
        "sda",
        &sda,
        "8:0",
        Some(&format!("{pci}/ata1/host0/target0:0:0/0:0:0:0")),
    );
    fake.partition(&sda, "sda1", 1, "8:1");
    let topo = fake.discover();

    assert_eq!(topo.disk_of(259, 3).unwrap().name, "nvme0n1");
    assert_eq!(topo.disk_of(259, 0).unwrap().name, "nvme0n1");
    assert_eq!(topo.disk_of(8, 1).unwrap().name, "sda");
    assert_eq!(topo.disk_of(8, 0).unwrap().name, "sda");
    assert!(topo.disk_of(8, 2).is_none());
    assert!(topo.disk_of(259, 1).is_none());
}

#[test]
fn no_node_directory_means_one_node_with_every_online_cpu() {
    let fake = FakeSysfs::new("0-3", "0-7");
    let topo = fake.discover();
    assert_eq!(
        topo.nodes,
        vec![Node {
            id: 0,
            cpus: vec![0, 1, 2, 3],
            distances: vec![(0, 10)]
        }]
    );
    assert_eq!(topo.online_cpus, vec![0, 1, 2, 3]);
    assert_eq!(topo.nr_cpu_ids, 8);
    let map = topo.cpu_to_node();
    assert_eq!(map.len(), 8);
    assert_eq!(&map[..4], &[Some(0); 4]);
    assert_eq!(&map[4..], &[None; 4]);
    assert!(topo.spill_order(0).is_empty());
    assert!(topo.devices.is_empty());
}

#[test]
fn cpu_less_node_is_listed_but_never_spilled_to() {
    let fake = FakeSysfs::new("0-7", "0-7");
    fake.node_online("0-2");
    fake.node(0, "0-3", "10 21 17");
    fake.node(1, "4-7", "21 10 28");
    fake.node(2, "", "17 28 10");
    let topo = fake.discover();

    assert_eq!(topo.nodes.len(), 3);
    let n2 = topo.node(2).unwrap();
    assert!(n2.cpus.is_empty());
    assert_eq!(n2.distances, vec![(0, 17), (1, 28), (2, 10)]);
    assert_eq!(topo.distance(1, 2), Some(28));
    // Node 2 is nearer to node 0 than node 1 is, but has no CPUs to run on.
    assert_eq!(topo.spill_order(0), vec![1]);
    assert_eq!(topo.spill_order(2), vec![0, 1]);
    assert!(topo.cpu_to_node().iter().all(|n| *n != Some(2)));
}

#[test]
fn offline_cpu_is_in_no_node() {
    let fake = FakeSysfs::new("0-2,4", "0-5");
    fake.node_online("0-1");
    fake.node(0, "0-3", "10 20");
    fake.node(1, "4-5", "20 10");
    let topo = fake.discover();

    assert_eq!(topo.node(0).unwrap().cpus, vec![0, 1, 2]);
    assert_eq!(topo.node(1).unwrap().cpus, vec![4]);
    assert_eq!(topo.nr_cpu_ids, 6);
    assert_eq!(
        topo.cpu_to_node(),
        vec![Some(0), Some(0), Some(0), None, Some(1), None]
    );
}

#[test]
fn online_cpu_missing_from_every_node_joins_the_lowest_node() {
    let fake = FakeSysfs::new("0-4", "0-4");
    fake.node_online("0-1");
    fake.node(0, "0-1", "10 20");
    fake.node(1, "1-3", "20 10");
    let topo = fake.discover();
    // CPU 1 is listed twice (kept by node 0); CPU 4 by nobody (given to node 0).
    assert_eq!(topo.node(0).unwrap().cpus, vec![0, 1, 4]);
    assert_eq!(topo.node(1).unwrap().cpus, vec![2, 3]);
    assert_eq!(
        topo.cpu_to_node(),
        vec![Some(0), Some(0), Some(1), Some(1), Some(0)]
    );
}

#[test]
fn node_id_gap_maps_distance_columns_by_online_nodes() {
    let fake = FakeSysfs::new("0-3", "0-3");
    fake.node_online("0,2");
    fake.node(0, "0-1", "10 20");
    fake.node(2, "2-3", "20 10");
    let topo = fake.discover();

    let ids: Vec<u32> = topo.nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, vec![0, 2]);
    assert_eq!(topo.node(2).unwrap().distances, vec![(0, 20), (2, 10)]);
    assert_eq!(topo.distance(0, 1), None);
    assert!(topo.node(1).is_none());
    assert_eq!(topo.spill_order(0), vec![2]);
    assert_eq!(topo.cpu_to_node(), vec![Some(0), Some(0), Some(2), Some(2)]);
}

#[test]
fn node_id_gap_without_node_online_file_uses_node_directories() {
    let fake = FakeSysfs::new("0-3", "0-3");
    fake.node(0, "0-1", "10 32");
    fake.node(2, "2-3", "32 10");
    let topo = fake.discover();
    assert_eq!(topo.distance(0, 2), Some(32));
    assert_eq!(topo.distance(2, 2), Some(10));
}

#[test]
fn unreadable_node_files_fall_back_to_defaults() {
    let fake = FakeSysfs::new("0-3", "0-3");
    fake.node_online("0-1");
    fake.node(0, "0-1", "10 20");
    // A directory where a file should be: unreadable even to root.
    fake.mkdir("devices/system/node/node1/cpulist");
    fake.mkdir("devices/system/node/node1/distance");
    let topo = fake.discover();
    // Node 1's CPUs are unknowable, so they land in node 0 instead of vanishing.
    assert_eq!(topo.node(0).unwrap().cpus, vec![0, 1, 2, 3]);
    assert!(topo.node(1).unwrap().cpus.is_empty());
    assert_eq!(topo.node(1).unwrap().distances, vec![(0, 20), (1, 10)]);
}

#[test]
fn fabrics_controller_with_no_node_is_unknown() {
    let fake = two_nodes();
    let ctrl = fake.fabrics_controller("nvme1", "-1");
    fake.nvme_disk("nvme1n1", &ctrl, "259:5");
    let topo = fake.discover();

    let d = topo.disk_of(259, 5).unwrap();
    assert_eq!(d.kind, DeviceKind::Nvme);
    assert_eq!(d.home_node, None);
    assert_eq!(d.controllers, vec!["nvme1"]);
    assert!(d.node_source.starts_with("unknown"), "{}", d.node_source);
    assert!(
        d.node_source.contains("class/nvme/nvme1/numa_node is -1"),
        "{}",
        d.node_source
    );
}

#[test]
fn fabrics_controller_numa_node_is_used_when_set() {
    let fake = two_nodes();
    let ctrl = fake.fabrics_controller("nvme1", "1");
    fake.nvme_disk("nvme1n1", &ctrl, "259:5");
    let topo = fake.discover();
    let d = &topo.devices[0];
    assert_eq!(d.home_node, Some(1));
    assert!(
        d.node_source.ends_with("class/nvme/nvme1/numa_node"),
        "{}",
        d.node_source
    );
}

#[test]
fn multipath_head_with_paths_on_one_node() {
    let fake = two_nodes();
    let c0 = fake.pcie_controller("nvme0", "0000:81:00.0", Some("1"));
    let c1 = fake.pcie_controller("nvme1", "0000:82:00.0", Some("1"));
    fake.multipath_head(
        "nvme0n1",
        "nvme-subsys0",
        "259:0",
        &[("nvme0c0n1", c0.as_str()), ("nvme0c1n1", c1.as_str())],
        true,
    );
    fake.partition(
        "devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1",
        "nvme0n1p1",
        1,
        "259:1",
    );
    let topo = fake.discover();

    // Hidden path disks are not devices of their own.
    assert_eq!(names(&topo), vec!["nvme0n1"]);
    let d = &topo.devices[0];
    assert_eq!(d.kind, DeviceKind::NvmeMultipathHead);
    assert_eq!(d.home_node, Some(1));
    assert_eq!(d.controllers, vec!["nvme0", "nvme1"]);
    assert!(
        d.node_source.starts_with("all paths on node 1"),
        "{}",
        d.node_source
    );
    assert_eq!(topo.disk_of(259, 1).unwrap().name, "nvme0n1");
    assert!(topo.disk_of(259, 100).is_none());
    assert_eq!(topo.nvme_devices().count(), 1);
    // Its requests are issued on the path disks, which go with it.
    assert_eq!(d.paths, vec!["nvme0c0n1", "nvme0c1n1"]);
}

#[test]
fn multipath_head_with_paths_on_two_nodes_is_unknown() {
    let fake = two_nodes();
    let c0 = fake.pcie_controller("nvme0", "0000:01:00.0", Some("0"));
    let c1 = fake.pcie_controller("nvme1", "0000:81:00.0", Some("1"));
    // No multipath/ directory (kernels before 6.15): paths found by name.
    fake.multipath_head(
        "nvme0n1",
        "nvme-subsys0",
        "259:0",
        &[("nvme0c0n1", c0.as_str()), ("nvme0c1n1", c1.as_str())],
        false,
    );
    let topo = fake.discover();

    assert_eq!(names(&topo), vec!["nvme0n1"]);
    let d = &topo.devices[0];
    assert_eq!(d.kind, DeviceKind::NvmeMultipathHead);
    assert_eq!(d.home_node, None);
    assert_eq!(d.controllers, vec!["nvme0", "nvme1"]);
    assert!(
        d.node_source.starts_with("unknown: paths on nodes 0,1"),
        "{}",
        d.node_source
    );
}

#[test]
fn multipath_head_with_one_unknown_path_is_unknown() {
    let fake = two_nodes();
    let c0 = fake.pcie_controller("nvme0", "0000:01:00.0", Some("0"));
    let c1 = fake.fabrics_controller("nvme1", "-1");
    fake.multipath_head(
        "nvme3n2",
        "nvme-subsys3",
        "259:7",
        &[("nvme3c0n2", c0.as_str()), ("nvme3c1n2", c1.as_str())],
        true,
    );
    let topo = fake.discover();
    let d = &topo.devices[0];
    assert_eq!(d.name, "nvme3n2");
    assert_eq!(d.home_node, None);
    assert!(
        d.node_source.contains("paths on nodes 0,unknown"),
        "{}",
        d.node_source
    );
}

#[test]
fn multipath_paths_of_other_namespaces_are_not_mixed_in() {
    let fake = two_nodes();
    let c0 = fake.pcie_controller("nvme0", "0000:01:00.0", Some("0"));
    let c1 = fake.pcie_controller("nvme1", "0000:81:00.0", Some("1"));
    fake.multipath_head(
        "nvme0n1",
        "nvme-subsys0",
        "259:0",
        &[("nvme0c0n1", c0.as_str())],
        false,
    );
    fake.multipath_head(
        "nvme0n2",
        "nvme-subsys0",
        "259:8",
        &[("nvme0c1n2", c1.as_str())],
        false,
    );
    let topo = fake.discover();
    assert_eq!(names(&topo), vec!["nvme0n1", "nvme0n2"]);
    assert_eq!(topo.devices[0].home_node, Some(0));
    assert_eq!(topo.devices[0].controllers, vec!["nvme0"]);
    assert_eq!(topo.devices[1].home_node, Some(1));
    assert_eq!(topo.devices[1].controllers, vec!["nvme1"]);
}

#[test]
fn no_block_devices_at_all() {
    let fake = two_nodes();
    assert!(fake.discover().devices.is_empty());
    fake.mkdir("block");
    let topo = fake.discover();
    assert!(topo.devices.is_empty());
    assert_eq!(topo.nvme_devices().count(), 0);
    assert!(topo.disk_of(259, 0).is_none());
    assert!(topo.render_text().contains("no block devices"));
}

#[test]
fn garbage_or_absent_numa_node_is_unknown() {
    let fake = two_nodes();
    let c0 = fake.pcie_controller("nvme0", "0000:01:00.0", Some("banana"));
    fake.nvme_disk("nvme0n1", &c0, "259:0");
    let c1 = fake.pcie_controller("nvme1", "0000:02:00.0", Some("7"));
    fake.nvme_disk("nvme1n1", &c1, "259:1");
    let c2 = fake.pcie_controller("nvme2", "0000:03:00.0", None);
    fake.nvme_disk("nvme2n1", &c2, "259:2");
    let topo = fake.discover();

    let homes: Vec<Option<u32>> = topo.devices.iter().map(|d| d.home_node).collect();
    assert_eq!(homes, vec![None, None, None]);
    assert!(
        topo.devices[0].node_source.contains("\"banana\""),
        "{}",
        topo.devices[0].node_source
    );
    assert!(
        topo.devices[1].node_source.contains("absent node 7"),
        "{}",
        topo.devices[1].node_source
    );
    assert_eq!(topo.devices[2].node_source, "unknown: no numa_node file");
}

#[test]
fn pci_function_numa_node_beats_controller_numa_node() {
    let fake = two_nodes();
    let c0 = fake.pcie_controller("nvme0", "0000:81:00.0", Some("1"));
    fake.file(&format!("{c0}/numa_node"), "0\n");
    fake.nvme_disk("nvme0n1", &c0, "259:0");
    // PCI says -1: the controller's own value is the next witness.
    let c1 = fake.pcie_controller("nvme1", "0000:82:00.0", Some("-1"));
    fake.file(&format!("{c1}/numa_node"), "1\n");
    fake.nvme_disk("nvme1n1", &c1, "259:1");
    let topo = fake.discover();
    assert_eq!(topo.devices[0].home_node, Some(1));
    assert_eq!(topo.devices[1].home_node, Some(1));
    assert!(topo.devices[1]
        .node_source
        .ends_with("class/nvme/nvme1/numa_node"));
}

#[test]
fn virtio_disk_takes_the_node_of_its_pci_function() {
    let fake = two_nodes();
    let pci = fake.pci("0000:00:02.0", Some("1"));
    let virtio = format!("{pci}/virtio1");
    fake.mkdir(&virtio);
    let vda = format!("{virtio}/block/vda");
    fake.disk("vda", &vda, "254:0", Some(&virtio));
    fake.partition(&vda, "vda1", 1, "254:1");
    fake.partition(&vda, "vda10", 10, "254:10");
    fake.partition(&vda, "vda2", 2, "254:2");
    fake.disk("loop0", "devices/virtual/block/loop0", "7:0", None);
    let topo = fake.discover();

    assert_eq!(names(&topo), vec!["loop0", "vda"]);
    let vda = &topo.devices[1];
    assert_eq!(vda.kind, DeviceKind::Other);
    assert_eq!(vda.home_node, Some(1));
    assert!(
        vda.node_source.ends_with("0000:00:02.0/numa_node"),
        "{}",
        vda.node_source
    );
    assert!(vda.controllers.is_empty());
    let parts: Vec<&str> = vda.partitions.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(parts, vec!["vda1", "vda2", "vda10"]);

    let lo = &topo.devices[0];
    assert_eq!(lo.home_node, None);
    assert!(lo.node_source.contains("virtual"), "{}", lo.node_source);
    assert_eq!(topo.nvme_devices().count(), 0);
}

#[test]
fn direct_device_numa_node_is_preferred() {
    let fake = two_nodes();
    let pci = fake.pci("0000:00:03.0", Some("0"));
    let host = format!("{pci}/host2");
    fake.file(&format!("{host}/numa_node"), "1\n");
    fake.disk("sdb", &format!("{host}/block/sdb"), "8:16", Some(&host));
    let topo = fake.discover();
    assert_eq!(topo.devices[0].home_node, Some(1));
    assert!(topo.devices[0]
        .node_source
        .ends_with("block/sdb/device/numa_node"));
}

#[test]
fn disk_without_readable_dev_is_left_out() {
    let fake = two_nodes();
    fake.disk("vdb", "devices/virtual/block/vdb", "not-a-dev", None);
    fake.disk("vdc", "devices/virtual/block/vdc", "252:0", None);
    assert_eq!(names(&fake.discover()), vec!["vdc"]);
}

#[test]
fn spill_order_sorts_by_distance_then_id_and_skips_cpu_less_nodes() {
    let fake = FakeSysfs::new("0-3", "0-3");
    fake.node_online("0-4");
    fake.node(0, "0", "10 30 20 12 20");
    fake.node(1, "1", "30 10 20 20 20");
    fake.node(2, "2", "20 20 10 20 20");
    fake.node(3, "", "12 20 20 10 20");
    fake.node(4, "3", "20 20 20 20 10");
    let topo = fake.discover();
    assert_eq!(topo.spill_order(0), vec![2, 4, 1]);
    assert_eq!(topo.spill_order(1), vec![2, 4, 0]);
    // Unknown origin: nothing is nearer than anything else, so plain id order.
    assert_eq!(topo.spill_order(9), vec![0, 1, 2, 4]);
}

#[test]
fn missing_possible_file_sizes_tables_from_online_cpus() {
    let fake = FakeSysfs::new("0-5", "0-5");
    fs::remove_file(fake.path("devices/system/cpu/possible")).unwrap();
    let topo = fake.discover();
    assert_eq!(topo.nr_cpu_ids, 6);
    assert_eq!(topo.cpu_to_node().len(), 6);
}

#[test]
fn missing_or_garbage_online_file_is_an_error_that_says_what_to_do() {
    let dir = TempDir::new().unwrap();
    let err = format!("{:#}", Topology::discover(dir.path()).unwrap_err());
    assert!(err.contains("devices/system/cpu/online"), "{err}");
    assert!(err.contains("mount"), "{err}");

    let fake = FakeSysfs::new("zero-three", "0-3");
    let err = format!("{:#}", Topology::discover(fake.root()).unwrap_err());
    assert!(err.contains("devices/system/cpu/online"), "{err}");
    assert!(err.contains("\"zero\""), "{err}");

    let fake = FakeSysfs::new("", "0-3");
    let err = format!("{:#}", Topology::discover(fake.root()).unwrap_err());
    assert!(err.contains("no online CPUs"), "{err}");
}

#[test]
fn render_text_shows_ranges_distances_and_devices() {
    let fake = FakeSysfs::new("0-3,8,10-11", "0-11");
    fake.node_online("0-1");
    fake.node(0, "0-3,8", "10 21");
    fake.node(1, "9-11", "21 10");
    let ctrl = fake.pcie_controller("nvme0", "0000:81:00.0", Some("1"));
    let disk = fake.nvme_disk("nvme0n1", &ctrl, "259:0");
    fake.partition(&disk, "nvme0n1p1", 1, "259:1");
    fake.disk("loop0", "devices/virtual/block/loop0", "7:0", None);
    let text = fake.discover().render_text();

    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.contains(&"0     0-3,8               10  21"),
        "{text}"
    );
    assert!(
        lines.contains(&"1     10-11               21  10"),
        "{text}"
    );
    assert!(
        lines.contains(&"nvme0n1  259:0    nvme   1        nvme0        nvme0n1p1"),
        "{text}"
    );
    assert!(
        lines.contains(&"loop0    7:0      other  unknown  -            -"),
        "{text}"
    );
    assert!(
        lines.contains(&"node  cpus   distance to   0   1"),
        "{text}"
    );
}

#[test]
fn json_uses_snake_case_kinds_and_round_trips() {
    let fake = two_nodes();
    let c0 = fake.pcie_controller("nvme0", "0000:81:00.0", Some("1"));
    fake.multipath_head(
        "nvme0n1",
        "nvme-subsys0",
        "259:0",
        &[("nvme0c0n1", c0.as_str())],
        true,
    );
    let topo = fake.discover();
    let json = serde_json::to_string_pretty(&topo).unwrap();
    assert!(json.contains("\"kind\": \"nvme_multipath_head\""), "{json}");
    assert!(json.contains("\"home_node\": 1"), "{json}");
    let back: Topology = serde_json::from_str(&json).unwrap();
    assert_eq!(back, topo);
}
