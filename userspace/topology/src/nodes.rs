//! NUMA nodes: which online CPUs each node has and how far apart nodes are.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::cpulist::parse_cpulist;
use crate::sysfs::{dir_names, read_trimmed};
use crate::Node;

/// The kernel's LOCAL_DISTANCE and REMOTE_DISTANCE: what `node_distance()` reports on
/// machines without a firmware distance table, so they are the honest guesses when a
/// `distance` file is missing or unreadable.
pub const LOCAL_DISTANCE: u32 = 10;
pub const REMOTE_DISTANCE: u32 = 20;

/// Reads `devices/system/node` under `root`. `online` is the sorted list of online
/// CPUs; every node's `cpus` is restricted to it.
///
/// Without a node directory (kernels built without CONFIG_NUMA, some containers) the
/// machine is one node 0 holding every online CPU.
pub(crate) fn read_nodes(root: &Path, online: &[u32]) -> Vec<Node> {
    let node_dir = root.join("devices/system/node");
    let mut ids: Vec<u32> = dir_names(&node_dir)
        .iter()
        .filter_map(|name| name.strip_prefix("node"))
        .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|digits| digits.parse().ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return vec![Node {
            id: 0,
            cpus: online.to_vec(),
            distances: vec![(0, LOCAL_DISTANCE)],
        }];
    }

    // Each `distance` row has one column per N_ONLINE node, ascending
    // (node_read_distance() walks for_each_online_node). `node/online` names those
    // nodes; the node directories are the fallback since nodes get a directory when
    // they come online.
    let online_nodes = read_trimmed(&node_dir.join("online"))
        .and_then(|s| parse_cpulist(&s).ok())
        .filter(|list| !list.is_empty())
        .unwrap_or_else(|| ids.clone());

    let online_set: BTreeSet<u32> = online.iter().copied().collect();
    let mut nodes: Vec<Node> = ids
        .iter()
        .map(|&id| {
            let dir = node_dir.join(format!("node{id}"));
            // An unreadable cpulist leaves the node CPU-less here; its CPUs are then
            // picked up by the orphan rule below rather than lost.
            let cpus = read_trimmed(&dir.join("cpulist"))
                .and_then(|s| parse_cpulist(&s).ok())
                .unwrap_or_default()
                .into_iter()
                .filter(|cpu| online_set.contains(cpu))
                .collect();
            let row = read_trimmed(&dir.join("distance")).and_then(|s| parse_row(&s));
            let distances = distance_row(id, row.as_deref(), &online_nodes, &ids);
            Node {
                id,
                cpus,
                distances,
            }
        })
        .collect();

    assign_each_cpu_once(&mut nodes, online);
    nodes
}

fn parse_row(s: &str) -> Option<Vec<u32>> {
    s.split_whitespace().map(|t| t.parse().ok()).collect()
}

/// Maps a raw `distance` row to (node id, distance) for every node in `ids`.
fn distance_row(
    id: u32,
    row: Option<&[u32]>,
    online_nodes: &[u32],
    ids: &[u32],
) -> Vec<(u32, u32)> {
    let columns: &[u32] = match row {
        Some(r) if r.len() == online_nodes.len() => online_nodes,
        Some(r) if r.len() == ids.len() => ids,
        // Lengths disagree (a node went on/offline between reads): pair what we can.
        _ => online_nodes,
    };
    let measured: BTreeMap<u32, u32> = columns
        .iter()
        .copied()
        .zip(row.unwrap_or_default().iter().copied())
        .collect();
    ids.iter()
        .map(|&other| {
            let fallback = if other == id {
                LOCAL_DISTANCE
            } else {
                REMOTE_DISTANCE
            };
            (other, measured.get(&other).copied().unwrap_or(fallback))
        })
        .collect()
}

/// Makes every online CPU belong to exactly one node, so per-node CPU masks and the
/// CPU→node map can never disagree. A CPU listed by two nodes stays with the lower id;
/// a CPU listed by none (a hotplug race, or an unreadable cpulist) joins the
/// lowest-numbered node (node 0 on almost every machine): a scheduler needs some node
/// for every CPU it may run tasks on, and a wrong guess costs locality, not
/// correctness.
fn assign_each_cpu_once(nodes: &mut [Node], online: &[u32]) {
    let mut seen = BTreeSet::new();
    for node in nodes.iter_mut() {
        node.cpus.retain(|cpu| seen.insert(*cpu));
    }
    let orphans: Vec<u32> = online
        .iter()
        .copied()
        .filter(|c| !seen.contains(c))
        .collect();
    if let Some(first) = nodes.first_mut() {
        first.cpus.extend(orphans);
        first.cpus.sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_maps_to_online_nodes_when_lengths_match() {
        let row = [10, 21, 31];
        assert_eq!(
            distance_row(2, Some(&row), &[0, 2, 5], &[0, 2, 5]),
            vec![(0, 10), (2, 21), (5, 31)]
        );
    }

    #[test]
    fn missing_row_uses_kernel_defaults() {
        assert_eq!(
            distance_row(1, None, &[0, 1], &[0, 1]),
            vec![(0, REMOTE_DISTANCE), (1, LOCAL_DISTANCE)]
        );
    }

    #[test]
    fn short_row_fills_the_rest_with_defaults() {
        assert_eq!(
            distance_row(0, Some(&[10, 12]), &[0, 1, 2], &[0, 1, 2]),
            vec![(0, 10), (1, 12), (2, REMOTE_DISTANCE)]
        );
    }

    #[test]
    fn garbage_row_is_rejected_whole() {
        assert_eq!(parse_row("10 x 20"), None);
        assert_eq!(parse_row("10 20\n"), Some(vec![10, 20]));
    }
}
