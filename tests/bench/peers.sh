#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# The sched_ext peers the benchmark runs beside scx_esn, built once from the
# Rust package registry with `cargo install` and cached by version:
#
#   $ESN_PEER_CACHE/<crate>-<version>/bin/<crate>   (default ~/.cache/scx_esn/peers)
#
# and linked from build/peers/bin/ so the guest finds them at one place. The
# three share one cargo target directory (they depend on the same scx_utils and
# libbpf-rs), so the second and third build mostly link. A version already in
# the cache is only checked. Prints the binaries' paths, one per line.
#
# Usage: tests/bench/peers.sh            build (if needed) and link all peers
#        tests/bench/peers.sh --list     name=version pairs, one per line
# Environment: ESN_PEER_CACHE, BPF_CLANG (clang >= 16; Debian 12: clang-19),
#              ESN_PEERS="scx_bpfland=1.1.4 ..." to change the set.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

# Pinned: a benchmark compares against fixed versions. scx_cosmos is the
# sched_ext project's default scheduler and the one peer with its own
# device-to-node placement.
peers=(${ESN_PEERS:-scx_bpfland=1.1.4 scx_rusty=1.1.4 scx_cosmos=1.1.7})

if [[ ${1:-} == --list ]]; then
	printf '%s\n' "${peers[@]}"
	exit 0
fi

cache=${ESN_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/scx_esn/peers}
links=$repo/build/peers/bin
mkdir -p "$cache" "$links"

if [[ -z ${BPF_CLANG:-} ]]; then
	BPF_CLANG=$(command -v clang-19 || command -v clang || true)
	[[ -n $BPF_CLANG ]] || {
		echo "peers: no clang found: install clang-19 (make deps) or set BPF_CLANG" >&2
		exit 1
	}
	export BPF_CLANG
fi

for pv in "${peers[@]}"; do
	name=${pv%%=*} version=${pv#*=}
	root=$cache/$name-$version
	bin=$root/bin/$name
	if [[ ! -x $bin ]]; then
		echo "peers: building $name $version with cargo install (once; cached in $root)" >&2
		t0=$(date +%s)
		# --locked: the crate's own lock file, as its authors tested it.
		cargo install --locked --quiet --version "=$version" --root "$root.tmp" \
			--target-dir "$cache/target" "$name" >&2
		rm -rf "$root"
		mv "$root.tmp" "$root"
		echo "peers: $name $version built in $(($(date +%s) - t0)) s" >&2
	fi
	ln -sfn "$bin" "$links/$name"
	echo "$links/$name"
done
