// SPDX-License-Identifier: GPL-2.0-only
#![allow(
    clippy::all,
    dead_code,
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case
)]
include!(concat!(env!("OUT_DIR"), "/bpf_intf.rs"));

// The plan (esn_topology, which cannot see this header) sizes BPF's arrays
// by its own copies of these limits: a build where they differ fails here.
const _: () = {
    assert!(esn_topology::plan::MAX_NODES == esn_limits_ESN_MAX_NODES as usize);
    assert!(esn_topology::plan::MAX_CPUS == esn_limits_ESN_MAX_CPUS as usize);
    assert!(esn_topology::plan::NO_NODE as u32 == ESN_NO_NODE);
};
