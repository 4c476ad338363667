// SPDX-License-Identifier: GPL-2.0-only
//! The running scheduler's reading, its interval and their outputs.
//!
//! ```text
//!  BPF maps ──(the binary: sched.rs reads them, one reading per pass of
//!             its loop)──► Cumulative: counters by Stat, node_sched,
//!                          /proc/stat, energy, the block I/O snapshot,
//!                          placed/thresholds, the controller's decisions
//!     ├─► interval(before, now) ─► IntervalStats ─► render(): --stats text
//!     │                                          └► serde: JSON, the stats
//!     │                                             socket, --monitor, top
//!     └─► metrics::exposition_text(): one /metrics scrape
//! ```
//!
//! Pure: nothing here touches BPF, files or sockets, so every output is
//! tested on recorded readings (recorded.rs holds them byte for byte, in
//! tests/golden/).

pub mod counters;
pub mod cumulative;
pub mod metrics;
pub mod schema;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod recorded;

pub use counters::{Counters, NodeSched, Stat};
pub use cumulative::{
    interval, render, Cumulative, Health, IntervalStats, NodeGauge, NodeLoad, Reading,
};
