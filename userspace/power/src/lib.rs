// SPDX-License-Identifier: GPL-2.0-only
//! Power for scx_esn: what the CPUs spend per NUMA node ([`energy`]: RAPL or
//! the model, in `--stats`, `top`, `/metrics` and `scx_esn energy`), and
//! lowering a node's CPU frequency while its block devices, not its CPUs,
//! are the bottleneck (`scx_esn --dvfs`, below).
//!
//! ```text
//!  every interval (100 ms), per node with devices and cpufreq:
//!    /sys/block/<dev>/stat io_ticks ─► utilisation = Δio_ticks / Δwall
//!      (the busiest of the node's devices)
//!    >= threshold (99 %) ─► each node CPU's scaling_max_freq one step down
//!    below it            ─► each back to the limit it had when we started
//!  before the first change: the original limits go to a record file;
//!  every exit (SIGINT, SIGTERM, error, reload) writes them back and removes
//!  it; after a SIGKILL, `scx_esn restore-freq` (or the next --dvfs start)
//!  puts them back from the record.
//! ```
//!
//! The rule is the companion research's: a device saturated by I/O gains
//! nothing from a faster CPU, so its node may run slower and spend less; the
//! moment the device is not saturated, the CPU is not slowed any more.
//!
//! [`cpufreq`] reads and writes one CPU's limits and the record; [`dvfs`]
//! holds the per-node state and the decision; [`cpustat`] reads busy and idle
//! ticks per node from /proc/stat (the `--stats` busy % and the energy
//! model). Everything takes a sysfs root (and a /proc/stat path), so the
//! tests run against fake trees.

pub mod cpufreq;
pub mod cpustat;
pub mod dvfs;
pub mod energy;
