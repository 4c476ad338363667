// SPDX-License-Identifier: GPL-2.0-only
//
// Compiles the two BPF objects with the scx toolchain (clang >= 16; set
// BPF_CLANG to pick one, e.g. BPF_CLANG=clang-19) and generates their
// skeletons and the bindings of bpf/intf.h:
//   - bpf/esn.bpf.c      the sched_ext scheduler (skeleton `bpf`)
//   - bpf/observe.bpf.c  block I/O observation only (skeleton `observe`)

use std::path::Path;
use std::process::Command;

/// The commit this binary is built from (`g` and 12 hex digits), for the
/// version line operators quote in bug reports; empty outside a git checkout
/// (a source package).
fn git_commit() -> String {
    let repo = Path::new("..");
    // Rebuild when HEAD moves: HEAD itself names the branch, the branch's ref
    // (loose or packed) names the commit.
    for file in [".git/HEAD", ".git/packed-refs"] {
        if repo.join(file).exists() {
            println!("cargo:rerun-if-changed=../{file}");
        }
    }
    if let Ok(head) = std::fs::read_to_string(repo.join(".git/HEAD")) {
        if let Some(branch) = head.trim().strip_prefix("ref: ") {
            if repo.join(".git").join(branch).exists() {
                println!("cargo:rerun-if-changed=../.git/{branch}");
            }
        }
    }
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| format!("g{}", String::from_utf8_lossy(&out.stdout).trim()))
        .unwrap_or_default()
}

fn main() {
    // `0.1.0-g0123456789ab x86_64-unknown-linux-gnu`, as the scx schedulers
    // print theirs.
    let commit = git_commit();
    println!(
        "cargo:rustc-env=SCX_ESN_FULL_VERSION={}{}{} {}",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        if commit.is_empty() { "" } else { "-" },
        commit,
        std::env::var("TARGET").unwrap_or_default()
    );
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
