// SPDX-License-Identifier: GPL-2.0-only
//! NVMe over fabrics: a controller with no PCI function of its own.
//!
//! ```text
//!  /sys/class/nvme/nvmeN/transport ─┬─ tcp ─► address: traddr=…,host_iface=…
//!                                   │          ├─ host_iface given ─► that NIC
//!                                   │          └─ else the route to traddr
//!                                   │             (/proc/net/route, ipv6_route:
//!                                   │              longest prefix, then metric)
//!                                   │          ─► numa_node of /sys/class/net/<nic>/device
//!                                   │             or of the nearest device above it
//!                                   ├─ rdma ─► the HCA's node, which the driver
//!                                   │          copies into the controller's numa_node
//!                                   │          (read before this module is asked)
//!                                   └─ fc, loop, … ─► unknown
//! ```
//!
//! A target address that is one of this host's own (`/proc/net/fib_trie`'s
//! `host LOCAL` entries, `/proc/net/if_inet6`) is unknown too: its I/O never
//! leaves memory, so no node is remote from it. Policy routing (`ip rule`)
//! is not followed: the main table decides.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use crate::sysfs::{read_numa_node, read_trimmed, NumaNodeFile};

/// Where a fabrics controller's I/O leaves the host, as far as it can be
/// known: `Ok(node)` or `Err(why not)`, with the path taken in `via`.
pub(crate) struct FabricsHome {
    pub node: Result<u32, String>,
    pub via: String,
}

/// The home of fabrics controller directory `ctrl_dir` (a `/sys/class/nvme`
/// entry), or `None` when it is not a fabrics controller (no `transport`,
/// or `pcie`). `node_ids` are the nodes that exist.
pub(crate) fn fabrics_home(
    sysfs: &Path,
    procfs: &Path,
    ctrl_dir: &Path,
    node_ids: &[u32],
) -> Option<FabricsHome> {
    let transport = read_trimmed(&ctrl_dir.join("transport"))?;
    if transport == "pcie" {
        return None;
    }
    if transport != "tcp" {
        return Some(FabricsHome {
            node: Err(format!("nvme-{transport}: no NIC or HBA node known")),
            via: format!("nvme-{transport}"),
        });
    }
    let address = read_trimmed(&ctrl_dir.join("address")).unwrap_or_default();
    let field = |key: &str| {
        address
            .split(',')
            .find_map(|kv| kv.trim().strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
    };
    let Some(traddr) = field("traddr") else {
        return Some(FabricsHome {
            node: Err(format!("nvme-tcp: no traddr in address {address:?}")),
            via: "nvme-tcp".into(),
        });
    };
    let nic = match field("host_iface") {
        Some(nic) => Ok(nic),
        None => egress_nic(procfs, &traddr),
    };
    let nic = match nic {
        Ok(nic) => nic,
        Err(why) => {
            return Some(FabricsHome {
                node: Err(format!("nvme-tcp to {traddr}: {why}")),
                via: format!("nvme-tcp to {traddr}"),
            })
        }
    };
    let Some(file) = nic_numa_file(sysfs, &nic) else {
        return Some(FabricsHome {
            node: Err(format!("NIC {nic} has no device with a node (virtual?)")),
            via: format!("nvme-tcp to {traddr} via {nic}"),
        });
    };
    let node = match read_numa_node(&file) {
        NumaNodeFile::Node(n) if node_ids.contains(&n) => Ok(n),
        NumaNodeFile::Node(n) => Err(format!("{} names absent node {n}", file.display())),
        NumaNodeFile::NoNode => Err(format!("{} is -1", file.display())),
        NumaNodeFile::Garbage(s) => Err(format!("{} holds {s:?}", file.display())),
        NumaNodeFile::Missing => Err(format!("{} vanished", file.display())),
    };
    Some(FabricsHome {
        node,
        via: format!("nvme-tcp to {traddr} via {nic}"),
    })
}

/// The `numa_node` of the device behind NIC `nic`, or of the nearest
/// device above it (a virtio NIC's own device has none; its PCI function
/// does).
fn nic_numa_file(sysfs: &Path, nic: &str) -> Option<PathBuf> {
    let dev = fs::canonicalize(sysfs.join("class/net").join(nic).join("device")).ok()?;
    dev.ancestors()
        .take(8)
        .map(|d| d.join("numa_node"))
        .find(|f| f.is_file())
}

/// The interface the main routing table sends `traddr` out of.
fn egress_nic(procfs: &Path, traddr: &str) -> Result<String, String> {
    let addr: IpAddr = traddr
        .parse()
        .map_err(|_| format!("traddr {traddr:?} is not an IP address"))?;
    let net = procfs.join("net");
    match addr {
        IpAddr::V4(a) => {
            let trie = fs::read_to_string(net.join("fib_trie")).unwrap_or_default();
            if local_v4(&trie).contains(&a) {
                return Err("the target is this host (loopback)".into());
            }
            let table = fs::read_to_string(net.join("route"))
                .map_err(|e| format!("cannot read {}: {e}", net.join("route").display()))?;
            route_v4(&table, a).ok_or_else(|| "no route".into())
        }
        IpAddr::V6(a) => {
            let mine = fs::read_to_string(net.join("if_inet6")).unwrap_or_default();
            if local_v6(&mine).contains(&a) {
                return Err("the target is this host (loopback)".into());
            }
            let table = fs::read_to_string(net.join("ipv6_route"))
                .map_err(|e| format!("cannot read {}: {e}", net.join("ipv6_route").display()))?;
            route_v6(&table, a).ok_or_else(|| "no route".into())
        }
    }
}

const RTF_UP: u32 = 0x1;

/// `/proc/net/route`: addresses and masks are `%08X` of a `__be32`.
fn route_v4(table: &str, dst: Ipv4Addr) -> Option<String> {
    // The printed number is the address's bytes, network order, loaded
    // as a native u32: its native bytes are the address.
    let be = |hex: &str| {
        u32::from_str_radix(hex, 16)
            .ok()
            .map(|v| u32::from_be_bytes(v.to_ne_bytes()))
    };
    let dst = u32::from(dst);
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (iface, dest, flags, metric, mask) = (
                f.first()?,
                be(f.get(1)?)?,
                f.get(3)?,
                f.get(6)?,
                be(f.get(7)?)?,
            );
            let flags = u32::from_str_radix(flags, 16).ok()?;
            let up = flags & RTF_UP != 0;
            (up && dst & mask == dest & mask).then(|| {
                (
                    mask.count_ones(),
                    metric.parse::<u32>().unwrap_or(u32::MAX),
                    iface.to_string(),
                )
            })
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, _, iface)| iface)
}

/// `/proc/net/ipv6_route`: dest, prefix length, source, its length, next
/// hop, metric, refcount, use, flags, interface; all hex but the name.
fn route_v6(table: &str, dst: Ipv6Addr) -> Option<String> {
    let dst = u128::from(dst);
    table
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                return None;
            }
            let dest = u128::from_str_radix(f[0], 16).ok()?;
            let len = u32::from_str_radix(f[1], 16).ok()?.min(128);
            let metric = u32::from_str_radix(f[5], 16).ok()?;
            let flags = u32::from_str_radix(f[8], 16).ok()?;
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            let usable = flags & RTF_UP != 0 && f[9] != "lo";
            (usable && dst & mask == dest & mask).then(|| (len, metric, f[9].to_string()))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, _, iface)| iface)
}

/// The host's own IPv4 addresses: `/proc/net/fib_trie`'s leaves followed by
/// a `/32 host LOCAL` line.
fn local_v4(trie: &str) -> Vec<Ipv4Addr> {
    let mut last: Option<Ipv4Addr> = None;
    let mut out = Vec::new();
    for line in trie.lines() {
        let t = line.trim_start();
        if let Some(leaf) = t.strip_prefix("|-- ") {
            last = leaf.trim().parse().ok();
        } else if t.starts_with("/32 host LOCAL") {
            out.extend(last);
        }
    }
    out
}

/// The host's own IPv6 addresses (`/proc/net/if_inet6`: 32 hex digits first).
fn local_v6(if_inet6: &str) -> Vec<Ipv6Addr> {
    if_inet6
        .lines()
        .filter_map(|l| u128::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .map(Ipv6Addr::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two NICs: 10.77.0.0/24 on eth1, default via 192.168.1.1 on eth0.
    const ROUTE: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
eth1\t00004D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth2\t00004D0A\t00000000\t0001\t0\t0\t50\t00FFFFFF\t0\t0\t0
down0\t02004D0A\t00000000\t0000\t0\t0\t0\tFFFFFFFF\t0\t0\t0
";

    #[test]
    fn v4_longest_prefix_then_lowest_metric_and_only_up_routes() {
        assert_eq!(
            route_v4(ROUTE, "10.77.0.2".parse().unwrap()).as_deref(),
            Some("eth1")
        );
        assert_eq!(
            route_v4(ROUTE, "8.8.8.8".parse().unwrap()).as_deref(),
            Some("eth0")
        );
        assert_eq!(
            route_v4(ROUTE, "192.168.1.7".parse().unwrap()).as_deref(),
            Some("eth0")
        );
        assert_eq!(route_v4("Iface\n", "10.0.0.1".parse().unwrap()), None);
    }

    #[test]
    fn v6_longest_prefix_and_never_lo() {
        let table = "\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth1
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0
fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
";
        assert_eq!(
            route_v6(table, "fd00::2".parse().unwrap()).as_deref(),
            Some("eth1")
        );
        assert_eq!(
            route_v6(table, "2001:db8::1".parse().unwrap()).as_deref(),
            Some("eth0")
        );
    }

    #[test]
    fn own_addresses_are_found() {
        let trie = "\
Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 10.77.0.0
        /24 link UNICAST
     |-- 10.77.0.1
        /32 host LOCAL
Local:
";
        assert_eq!(local_v4(trie), vec![Ipv4Addr::new(10, 77, 0, 1)]);
        let inet6 = "fd000000000000000000000000000001 02 40 00 80     eth1\n";
        assert_eq!(
            local_v6(inet6),
            vec!["fd00::1".parse::<Ipv6Addr>().unwrap()]
        );
    }

    fn fake(dir: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let p = dir.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
    }

    #[test]
    fn tcp_maps_to_the_egress_nic_node_and_says_why_not_otherwise() {
        let tmp = tempfile::tempdir().unwrap();
        let (sys, proc) = (tmp.path().join("sys"), tmp.path().join("proc"));
        fake(
            tmp.path(),
            &[
                ("proc/net/route", ROUTE),
                (
                    "proc/net/fib_trie",
                    "     |-- 10.77.0.1\n        /32 host LOCAL\n",
                ),
                ("sys/devices/pci0000:20/0000:21:00.0/numa_node", "1\n"),
                ("sys/devices/pci0000:20/0000:21:00.0/virtio3/net/eth1/x", ""),
                ("sys/class/net/eth0/device/numa_node", "-1\n"),
                ("sys/class/nvme/nvme1/transport", "tcp\n"),
                (
                    "sys/class/nvme/nvme1/address",
                    "traddr=10.77.0.2,trsvcid=4420,src_addr=10.77.0.1\n",
                ),
                ("sys/class/nvme/nvme2/transport", "tcp\n"),
                (
                    "sys/class/nvme/nvme2/address",
                    "traddr=10.77.0.1,trsvcid=4420\n",
                ),
                ("sys/class/nvme/nvme3/transport", "tcp\n"),
                (
                    "sys/class/nvme/nvme3/address",
                    "traddr=8.8.8.8,trsvcid=4420\n",
                ),
                ("sys/class/nvme/nvme4/transport", "tcp\n"),
                (
                    "sys/class/nvme/nvme4/address",
                    "traddr=8.8.8.8,trsvcid=4420,host_iface=eth1\n",
                ),
                ("sys/class/nvme/nvme5/transport", "fc\n"),
                ("sys/class/nvme/nvme6/transport", "pcie\n"),
            ],
        );
        // A virtio NIC: its device has no numa_node, its PCI function has.
        fs::create_dir_all(sys.join("class/net/eth1")).unwrap();
        std::os::unix::fs::symlink(
            sys.join("devices/pci0000:20/0000:21:00.0/virtio3"),
            sys.join("class/net/eth1/device"),
        )
        .unwrap();
        let home = |c: &str| fabrics_home(&sys, &proc, &sys.join("class/nvme").join(c), &[0, 1]);
        let h = home("nvme1").unwrap();
        assert_eq!(h.node, Ok(1));
        assert_eq!(h.via, "nvme-tcp to 10.77.0.2 via eth1");
        let h = home("nvme2").unwrap();
        assert!(h.node.unwrap_err().contains("this host"));
        let h = home("nvme3").unwrap();
        assert!(h.node.unwrap_err().contains("is -1"), "via eth0");
        assert_eq!(home("nvme4").unwrap().node, Ok(1), "host_iface wins");
        assert!(home("nvme5").unwrap().node.unwrap_err().contains("nvme-fc"));
        assert!(home("nvme6").is_none());
        assert!(home("nvme7").is_none(), "no transport file");
        // Nodes that do not exist are not trusted.
        let h = fabrics_home(&sys, &proc, &sys.join("class/nvme/nvme1"), &[0]).unwrap();
        assert!(h.node.unwrap_err().contains("absent node 1"));
    }
}
