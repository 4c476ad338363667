// SPDX-License-Identifier: GPL-2.0-only
//! The userspace half of blk-mq observation (bpf/blkobs.bpf.h), shared by
//! the scheduler and `scx_esn observe`.
//!
//! ```text
//!  kernel BTF ─► choose_hooks() ─► autoload one program per tracepoint
//!  Plan::device_table() ─► register_devices() ─► dev_home_node map (locality in BPF)
//!  BPF maps   ─► BlkObsMaps::snapshot() ─► esn_stats::RawSnapshot
//!                BlkObsMaps::age_inflight() drops requests that never
//!                completed (a lost completion must not fill the table)
//! ```
//!
//! By job: `hooks.rs` (which tracepoints, which program variant, the late
//! issue hook, program cost), `devices.rs` (what BPF is told about disks,
//! busy time), `maps.rs` (reading the maps, aging).
//!
//! Both skeletons carry the same maps and programs (the header is included
//! by both objects), so everything here works on `&dyn MapCore` and on
//! program names, never on one skeleton's generated types.

mod devices;
mod hooks;
mod maps;

pub use devices::*;
pub use hooks::*;
pub use maps::*;
