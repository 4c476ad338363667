// SPDX-License-Identifier: GPL-2.0-only
//
// Compiles the floor scheduler (bpf/floor_sched.bpf.c, kept with the
// project's other BPF C) and generates its skeleton `floor`.

fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("BPF toolchain: is clang >= 16 installed (set BPF_CLANG)?")
        .enable_skel("../../bpf/floor_sched.bpf.c", "floor")
        .build()
        .expect("building the floor scheduler's BPF program failed (see the clang output above)");
}
