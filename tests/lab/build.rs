// SPDX-License-Identifier: GPL-2.0-only
//
// Compiles the lab's BPF program (bpf/lab_penalty.bpf.c, kept with the
// project's other BPF C) and generates its skeleton `lab`.

fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("BPF toolchain: is clang >= 16 installed (set BPF_CLANG)?")
        .enable_skel("../../bpf/lab_penalty.bpf.c", "lab")
        .build()
        .expect("building the lab's BPF program failed (see the clang output above)");
}
