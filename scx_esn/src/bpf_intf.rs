// SPDX-License-Identifier: GPL-2.0-only
#![allow(
    clippy::all,
    dead_code,
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case
)]
include!(concat!(env!("OUT_DIR"), "/bpf_intf.rs"));
