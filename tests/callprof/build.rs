// SPDX-License-Identifier: GPL-2.0-only
//
// Compiles the per-call profiler's BPF programs (bpf/callprof.bpf.c, kept with
// the project's other BPF C). The loader embeds the object itself (it opens
// it once per callback it profiles); the skeleton is not used.

fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("BPF toolchain: is clang >= 16 installed (set BPF_CLANG)?")
        .enable_skel("../../bpf/callprof.bpf.c", "callprof")
        .build()
        .expect("building the profiler's BPF programs failed (see the clang output above)");
}
