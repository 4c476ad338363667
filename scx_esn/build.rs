// SPDX-License-Identifier: GPL-2.0-only
//
// Compiles the two BPF objects with the scx toolchain (clang >= 16; set
// BPF_CLANG to pick one, e.g. BPF_CLANG=clang-19) and generates their
// skeletons and the bindings of bpf/intf.h:
//   - bpf/esn.bpf.c      the sched_ext scheduler (skeleton `bpf`)
//   - bpf/observe.bpf.c  block I/O observation only (skeleton `observe`)

fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("BPF toolchain: is clang >= 16 installed (set BPF_CLANG)?")
        .enable_intf("../bpf/intf.h", "bpf_intf.rs")
        .enable_skel("../bpf/esn.bpf.c", "bpf")
        .build()
        .expect("building the BPF scheduler failed (see the clang output above)");
    // The observer must load on kernels older than sched_ext's (Debian 12's
    // 6.1): BPF ISA v3, not the v4 the scx toolchain selects (the last
    // -mcpu wins).
    scx_cargo::BpfBuilder::new()
        .expect("BPF toolchain: is clang >= 16 installed (set BPF_CLANG)?")
        .add_cflag("-mcpu=v3")
        .enable_skel("../bpf/observe.bpf.c", "observe")
        .build()
        .expect("building the BPF observer failed (see the clang output above)");
}
