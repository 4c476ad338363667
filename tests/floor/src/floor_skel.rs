// SPDX-License-Identifier: GPL-2.0-only
#![allow(clippy::all, dead_code, non_snake_case, non_camel_case_types)]
include!(concat!(env!("OUT_DIR"), "/floor_skel.rs"));
