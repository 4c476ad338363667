// SPDX-License-Identifier: GPL-2.0-only
//! A reading as a Prometheus scrape (`/metrics`, OpenMetrics text):
//!
//! ```text
//!  Arc<Cumulative> ─► Exposition (a prometheus-client Collector) ─► Registry
//!                  ─► exposition_text() ─► the body of one scrape
//! ```
//!
//! Prometheus computes rates itself, so everything is exported as it is
//! counted since the scheduler started (counters end in `_total`, latency
//! histograms are in seconds); only the per-node placement state and the
//! controller's penalties are gauges.

use std::sync::Arc;

use anyhow::{Context, Result};
use esn_stats::hist::{slot_upper_ns, LatHist, LAT_SLOTS};
use esn_topology::devt::DeviceTable;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::counters;
use crate::cumulative::{Cumulative, NodeGauge};

/// Histogram buckets of a log2 latency histogram, in seconds: slots below
/// ~1 us fold into the first bucket and the last slot has no upper bound, so
/// a series has 26 buckets instead of 40 without losing any sample.
const FIRST_BUCKET_SLOT: usize = 9;
const LAST_BOUNDED_SLOT: usize = 34;

/// (upper bound in seconds, samples in that bucket) as encode_histogram takes
/// them (it makes them cumulative), and the total.
fn buckets(h: &LatHist) -> (Vec<(f64, u64)>, u64) {
    let mut out = Vec::with_capacity(LAST_BOUNDED_SLOT - FIRST_BUCKET_SLOT + 2);
    let below: u64 = h.slots[..=FIRST_BUCKET_SLOT].iter().sum();
    let mut push = |slot: usize, n: u64| {
        let upper = slot_upper_ns(slot).expect("a bounded slot") as f64 / 1e9;
        out.push((upper, n));
    };
    push(FIRST_BUCKET_SLOT, below);
    for slot in FIRST_BUCKET_SLOT + 1..=LAST_BOUNDED_SLOT {
        push(slot, h.slots[slot]);
    }
    let above: u64 = h.slots[LAST_BOUNDED_SLOT + 1..LAT_SLOTS].iter().sum();
    out.push((f64::INFINITY, above));
    // The count must match the buckets (Prometheus checks it); BPF's own
    // count may run a few ahead of the slots while being updated.
    let total = out.iter().map(|(_, n)| n).sum();
    (out, total)
}

/// One scrape: a reading and the names of the disks in it.
#[derive(Debug)]
struct Exposition {
    reading: Arc<Cumulative>,
    devices: DeviceTable,
}

type Labels = Vec<(&'static str, String)>;

fn counter_family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: &[(Labels, u64)],
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, unit, MetricType::Counter)?;
    for (labels, value) in series {
        ConstCounter::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

fn float_counter_family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: &[(Labels, f64)],
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, unit, MetricType::Counter)?;
    for (labels, value) in series {
        ConstCounter::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// A counter with one series and no labels (`name_total value`, not
/// `name_total{} value`).
fn unlabelled_counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    counter: impl EncodeMetric,
) -> std::fmt::Result {
    counter.encode(encoder.encode_descriptor(name, help, unit, MetricType::Counter)?)
}

fn gauge_family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels, f64)],
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

fn histogram_family<'h>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Labels, &'h LatHist)>,
) -> std::fmt::Result {
    let mut family =
        encoder.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
    for (labels, hist) in series {
        let (b, total) = buckets(hist);
        family.encode_family(&labels)?.encode_histogram::<Labels>(
            hist.sum_ns as f64 / 1e9,
            total,
            &b,
            None,
        )?;
    }
    Ok(())
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let r = &self.reading;
        let node = |n: u32| ("node", n.to_string());

        let events: Vec<(Labels, u64)> = counters::NAMES
            .iter()
            .zip(r.counters.iter())
            .map(|(name, &v)| (vec![("event", name.to_string())], v))
            .collect();
        counter_family(
            &mut encoder,
            "scx_esn_events",
            "Scheduler and request-tracking events by kind (the --stats counters)",
            None,
            &events,
        )?;

        let gauges = |f: fn(&NodeGauge) -> u32| -> Vec<(Labels, f64)> {
            r.nodes
                .iter()
                .map(|g| (vec![node(g.node)], f(g) as f64))
                .collect()
        };
        gauge_family(
            &mut encoder,
            "scx_esn_node_placed_tasks",
            "I/O-bound tasks placed on the node now",
            &gauges(|g| g.placed),
        )?;
        gauge_family(
            &mut encoder,
            "scx_esn_node_threshold",
            "Most I/O-bound tasks the node keeps before spilling (learned or pinned)",
            &gauges(|g| g.threshold),
        )?;

        let mut waits = Vec::new();
        let mut wait_secs = Vec::new();
        for (idx, w) in r.sched.iter().map(|s| &s.waits).enumerate() {
            for (class, n, ns) in [
                ("io", w.io_waits, w.io_wait_ns),
                ("fair", w.fair_waits, w.fair_wait_ns),
            ] {
                let labels = vec![node(idx as u32), ("class", class.to_string())];
                waits.push((labels.clone(), n));
                wait_secs.push((labels, ns as f64 / 1e9));
            }
        }
        counter_family(
            &mut encoder,
            "scx_esn_runnable_waits",
            "Runnable-to-running waits on the node: placed I/O tasks (io) and the rest (fair)",
            None,
            &waits,
        )?;
        float_counter_family(
            &mut encoder,
            "scx_esn_runnable_wait",
            "Time spent runnable before running, summed, by node and class",
            Some(&Unit::Seconds),
            &wait_secs,
        )?;

        let mut spills = Vec::new();
        let mut stolen = Vec::new();
        for (idx, n) in r.sched.iter().enumerate() {
            for (direction, count) in [("in", n.spill_in), ("out", n.spill_out)] {
                spills.push((
                    vec![node(idx as u32), ("direction", direction.to_string())],
                    count,
                ));
            }
            stolen.push((vec![node(idx as u32)], n.stolen_from));
        }
        counter_family(
            &mut encoder,
            "scx_esn_node_spills",
            "I/O-bound tasks placed away from their home node: in = homed elsewhere, \
             placed here; out = homed here, placed elsewhere",
            None,
            &spills,
        )?;
        counter_family(
            &mut encoder,
            "scx_esn_node_stolen",
            "Times a CPU of another node ran a task placed on this node (its CPUs were busy)",
            None,
            &stolen,
        )?;

        let p_numa: Vec<(Labels, f64)> = r
            .decisions
            .iter()
            .map(|d| {
                let source = d.p_numa_source.as_str().to_string();
                (vec![node(d.node), ("source", source)], d.p_numa)
            })
            .collect();
        gauge_family(
            &mut encoder,
            "scx_esn_numa_penalty",
            "P_numa the node's threshold is balanced against (remote over local I/O cost)",
            &p_numa,
        )?;
        let spill: Vec<(Labels, f64)> = r
            .decisions
            .iter()
            .map(|d| (vec![node(d.node)], d.spill_contention))
            .collect();
        gauge_family(
            &mut encoder,
            "scx_esn_spill_contention",
            "What a task spilled from the node waits for a CPU where it spills to, over local I/O cost; added to P_numa",
            &spill,
        )?;
        let p_cont: Vec<(Labels, f64)> = r
            .decisions
            .iter()
            .filter_map(|d| d.p_cont.map(|p| (vec![node(d.node)], p)))
            .collect();
        gauge_family(
            &mut encoder,
            "scx_esn_contention_penalty",
            "P_cont last observed on the node (placed tasks' wait over an uncontended one)",
            &p_cont,
        )?;

        // Block I/O since start, by disk, locality and op.
        let io_labels = |key: &esn_stats::snapshot::IoKey| -> Labels {
            let info = self.devices.lookup(key.dev);
            vec![
                ("device", self.devices.name_of(key.dev)),
                (
                    "node",
                    info.and_then(|d| d.node)
                        .map_or_else(|| "unknown".to_string(), |n| n.to_string()),
                ),
                ("locality", key.locality.as_str().to_string()),
                ("op", key.op.as_str().to_string()),
            ]
        };
        let mut reqs = Vec::new();
        let mut bytes = Vec::new();
        let mut cross = Vec::new();
        for (key, c) in &r.io.io {
            let labels = io_labels(key);
            reqs.push((labels.clone(), c.reqs));
            bytes.push((labels.clone(), c.bytes));
            cross.push((labels, c.cross_completions));
        }
        counter_family(
            &mut encoder,
            "scx_esn_io_requests",
            "Completed block requests; locality is the submitting CPU's node against the disk's",
            None,
            &reqs,
        )?;
        counter_family(
            &mut encoder,
            "scx_esn_io",
            "Bytes of completed block requests",
            Some(&Unit::Bytes),
            &bytes,
        )?;
        counter_family(
            &mut encoder,
            "scx_esn_io_cross_node_completions",
            "Requests completed on a node other than the one that submitted them",
            None,
            &cross,
        )?;
        histogram_family(
            &mut encoder,
            "scx_esn_io_device_latency",
            "Block request latency from issue to completion (the device's time)",
            r.io.io.iter().map(|(k, c)| (io_labels(k), &c.device)),
        )?;
        histogram_family(
            &mut encoder,
            "scx_esn_io_queue_latency",
            "Block request latency from submission to issue (time in the block layer)",
            r.io.io.iter().map(|(k, c)| (io_labels(k), &c.queue)),
        )?;

        let mut node_reqs = Vec::new();
        for (&n, io) in &r.io.nodes {
            node_reqs.push((vec![node(n), ("locality", "any".into())], io.reqs));
            node_reqs.push((vec![node(n), ("locality", "remote".into())], io.remote_reqs));
        }
        counter_family(
            &mut encoder,
            "scx_esn_node_submitted_requests",
            "Block requests submitted from the node's CPUs, all and those to a remote disk",
            None,
            &node_reqs,
        )?;

        let busy: Vec<(Labels, f64)> =
            r.io.io_ticks_ms
                .iter()
                .map(|(&dev, &ms)| (vec![("device", self.devices.name_of(dev))], ms as f64 / 1e3))
                .collect();
        float_counter_family(
            &mut encoder,
            "scx_esn_io_busy",
            "Time the disk had requests in flight since boot (io_ticks): its utilisation's rate",
            Some(&Unit::Seconds),
            &busy,
        )?;

        // Counted (RAPL) or estimated: the label says which, so a dashboard
        // never shows the model's figure as a measurement.
        if let Some(e) = &r.energy {
            let joules: Vec<(Labels, f64)> = e
                .joules
                .iter()
                .map(|&(n, j)| (vec![node(n), ("source", e.source.as_str().into())], j))
                .collect();
            float_counter_family(
                &mut encoder,
                "scx_esn_cpu_energy",
                "Energy of the node's CPUs since scx_esn started: source=rapl is the \
                 processor's count, source=estimated the model (busy and idle time at \
                 --energy-watts)",
                Some(&Unit::Joules),
                &joules,
            )?;
        }

        // What the block-layer BPF programs cost; zero unless the kernel counts
        // it (sysctl kernel.bpf_stats_enabled=1).
        let cost = r.io.cost;
        unlabelled_counter(
            &mut encoder,
            "scx_esn_bpf_run",
            "CPU time spent in scx_esn's block I/O BPF programs (kernel.bpf_stats_enabled=1)",
            Some(&Unit::Seconds),
            ConstCounter::new(cost.run_time_ns as f64 / 1e9),
        )?;
        unlabelled_counter(
            &mut encoder,
            "scx_esn_bpf_runs",
            "Runs of scx_esn's block I/O BPF programs (kernel.bpf_stats_enabled=1)",
            None,
            ConstCounter::new(cost.run_cnt),
        )?;
        Ok(())
    }
}

/// The body of one scrape.
pub fn exposition_text(reading: Arc<Cumulative>, devices: &DeviceTable) -> Result<String> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Exposition {
        reading,
        devices: devices.clone(),
    }));
    let mut body = String::new();
    prometheus_client::encoding::text::encode(&mut body, &registry)
        .context("encoding the metrics")?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::NodeSched;
    use crate::fixtures;
    use esn_controller::NodeWaits;
    use esn_stats::snapshot::{IoCounters, IoKey, Locality, NodeIo, Op};
    use esn_topology::devt::DevT;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn devices() -> DeviceTable {
        fixtures::devices(false)
    }

    fn reading() -> Cumulative {
        let mut c = Cumulative::default();
        c.counters[0] = 7;
        c.sched = vec![
            NodeSched::default(),
            NodeSched {
                waits: NodeWaits {
                    io_waits: 4,
                    io_wait_ns: 2_000_000_000,
                    fair_waits: 1,
                    fair_wait_ns: 5,
                    ..Default::default()
                },
                spill_in: 3,
                stolen_from: 6,
                ..Default::default()
            },
        ];
        c.io.io_ticks_ms = BTreeMap::from([(DevT::new(259, 0), 2500)]);
        c.energy = Some(fixtures::energy(Duration::ZERO, [12.5, 40.0]));
        c.io.cost = esn_stats::snapshot::BpfCost {
            run_time_ns: 1_500_000_000,
            run_cnt: 40,
        };
        c.nodes = fixtures::gauges(2, 3);
        let mut device = LatHist::default();
        for ns in [100, 50_000, 50_000, 3_000_000, u64::MAX / 2] {
            device.record(ns);
        }
        for (locality, reqs) in [(Locality::Local, 5), (Locality::Remote, 2)] {
            c.io.io.insert(
                IoKey {
                    dev: DevT::new(259, 0),
                    locality,
                    op: Op::Read,
                },
                IoCounters {
                    reqs,
                    bytes: reqs * 4096,
                    device: device.clone(),
                    ..Default::default()
                },
            );
        }
        c.io.nodes = BTreeMap::from([(
            0,
            NodeIo {
                reqs: 2,
                remote_reqs: 2,
                ..Default::default()
            },
        )]);
        c
    }

    /// name{labels} -> value, every sample line of an exposition.
    fn samples(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("a sample line");
                (series.to_string(), value.parse().expect("a number"))
            })
            .collect()
    }

    #[test]
    fn buckets_keep_every_sample_and_their_bounds_grow() {
        let mut h = LatHist::default();
        for ns in [0, 1, 700, 1024, 5_000, 40_000_000_000, u64::MAX] {
            h.record(ns);
        }
        let (b, total) = buckets(&h);
        assert_eq!(total, 7);
        assert_eq!(b.first().unwrap(), &(1024e-9, 3));
        assert_eq!(b.last().unwrap(), &(f64::INFINITY, 2));
        assert!(b.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn exposition_names_units_and_labels() {
        let text = exposition_text(Arc::new(reading()), &devices()).unwrap();
        assert!(text.ends_with("# EOF\n"), "{text}");
        let s = samples(&text);
        let get = |k: &str| *s.get(k).unwrap_or_else(|| panic!("no {k} in\n{text}"));
        assert_eq!(get("scx_esn_events_total{event=\"place_local\"}"), 7.0);
        assert_eq!(get("scx_esn_node_threshold{node=\"1\"}"), 3.0);
        assert_eq!(get("scx_esn_node_placed_tasks{node=\"1\"}"), 2.0);
        assert_eq!(
            get("scx_esn_cpu_energy_joules_total{node=\"1\",source=\"estimated\"}"),
            40.0
        );
        assert_eq!(
            get("scx_esn_runnable_wait_seconds_total{node=\"1\",class=\"io\"}"),
            2.0
        );
        let local = "device=\"nvme0n1\",node=\"1\",locality=\"local\",op=\"read\"";
        assert_eq!(get(&format!("scx_esn_io_requests_total{{{local}}}")), 5.0);
        assert_eq!(get(&format!("scx_esn_io_bytes_total{{{local}}}")), 20480.0);
        assert_eq!(
            get(&format!(
                "scx_esn_io_device_latency_seconds_count{{{local}}}"
            )),
            5.0
        );
        assert_eq!(
            get(&format!(
                "scx_esn_io_device_latency_seconds_bucket{{le=\"+Inf\",{local}}}"
            )),
            5.0
        );
        assert_eq!(
            get("scx_esn_node_submitted_requests_total{node=\"0\",locality=\"remote\"}"),
            2.0
        );
        assert_eq!(
            get("scx_esn_node_spills_total{node=\"1\",direction=\"in\"}"),
            3.0
        );
        assert_eq!(get("scx_esn_node_stolen_total{node=\"1\"}"), 6.0);
        assert_eq!(
            get("scx_esn_io_busy_seconds_total{device=\"nvme0n1\"}"),
            2.5
        );
        assert_eq!(get("scx_esn_bpf_run_seconds_total"), 1.5);
        assert_eq!(get("scx_esn_bpf_runs_total"), 40.0);
        // Every counter sample ends in _total, every histogram is in seconds.
        for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
            let mut w = line.split_whitespace().skip(2);
            let (name, kind) = (w.next().unwrap(), w.next().unwrap());
            if kind == "histogram" {
                assert!(name.ends_with("_seconds"), "{line}");
            }
        }
        for series in s.keys() {
            let name = series.split('{').next().unwrap();
            let family = text
                .lines()
                .filter_map(|l| l.strip_prefix("# TYPE "))
                .find(|t| name.starts_with(t.split(' ').next().unwrap()))
                .unwrap_or_else(|| panic!("{name} has no TYPE line"));
            if family.ends_with(" counter") {
                assert!(name.ends_with("_total"), "{name}");
            }
        }
    }

    #[test]
    fn an_empty_reading_is_a_valid_exposition() {
        let text =
            exposition_text(Arc::new(Cumulative::default()), &DeviceTable::default()).unwrap();
        assert!(text.contains("# TYPE scx_esn_events counter"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}
