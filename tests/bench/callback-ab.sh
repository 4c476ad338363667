#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# What each sched_ext callback costs per call, for several scheduler builds
# side by side in one boot of the 2-node VM: an A/B of a change to the BPF
# side (issue 16's callback target), with peers beside it. numa-bench.sh's
# BPF figures come with every point of a long run; this measures only the
# callbacks, under two loads, with the builds interleaved round by round.
#
# Usage: tests/bench/callback-ab.sh NAME=BINARY [NAME=BINARY ...]
#   e.g. callback-ab.sh base=/tmp/scx_esn.main esn=target/release/scx_esn \
#        scx_bpfland=build/peers/bin/scx_bpfland
# A build whose --help offers --no-state (scx_esn) runs with it, any other
# with no arguments.
# Environment: AB_ROUNDS (3), AB_PROFILE (1: after the bpf stats window,
#   esn-callprof times every call for 5 s, and the report adds each
#   callback's median call, the figure single-threaded TCG's vCPU switches
#   do not move; 0: bpf stats only), AB_LOADS ("io-4 hackbench"; io-J is fio 4k
#   randread with J jobs on the node-1 NVMe), AB_REF (a NAME the report also
#   divides by; default the last one), ESN_VM_APPEND (default tsc=reliable:
#   on the emulated HPET every clock read is a device access, which charges
#   schedulers that read the clock for a cost no server has).
# Needs: tests/vm/setup.sh. Report: build/bench/callback-ab/callback-ab.txt
# (callback_ab.py) and the raw callback-ab.tsv. Exit 0 when every build was
# measured. Takes 45-130 s per build, load and round under TCG (hackbench with
# AB_PROFILE=1 the longest; the guest is given 150 s each).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
die() { echo "callback-ab: $*" >&2; exit 2; }
(($# >= 1)) || die "usage: $0 NAME=BINARY [NAME=BINARY ...]"
builds=()
last=
for arg in "$@"; do
	[[ $arg =~ ^([A-Za-z0-9_.-]+)=(.+)$ ]] || die "not NAME=BINARY: $arg"
	bin=$(realpath -e "${BASH_REMATCH[2]}" 2>/dev/null) || die "no such file: ${BASH_REMATCH[2]}"
	[[ -x $bin ]] || die "not executable: $bin"
	builds+=("${BASH_REMATCH[1]}=$bin")
	last=${BASH_REMATCH[1]}
done
rounds=${AB_ROUNDS:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "AB_ROUNDS=$rounds: a whole number >= 1"
loads=${AB_LOADS:-io-4 hackbench}
for load in $loads; do
	[[ $load =~ ^io-[1-9][0-9]*$ || $load == hackbench ]] || die "AB_LOADS: unknown load $load (io-J, hackbench)"
done
profile=${AB_PROFILE:-1}
[[ $profile == [01] ]] || die "AB_PROFILE=$profile: 0 or 1"
((profile == 0)) || [[ -x $repo/target/release/esn-callprof ]] || die "no target/release/esn-callprof: make build (or AB_PROFILE=0)"
outdir=$repo/build/bench/callback-ab
rm -rf "$outdir"
n=$((${#builds[@]} * $(wc -w <<<"$loads") * rounds))
rc=0
ESN_VM_APPEND=${ESN_VM_APPEND-tsc=reliable} ESN_VM_QUIET=1 ESN_VM_TIMEOUT=$((300 + 150 * n)) \
	"$repo/tests/vm/run-in-vm.sh" "$here/guest-callback-ab.sh" "$outdir" \
	"AB_BUILDS=${builds[*]}" "AB_ROUNDS=$rounds" "AB_LOADS=$loads" "AB_PROFILE=$profile" || rc=$?
if [[ -s $outdir/callback-ab.tsv ]]; then
	calls=()
	((profile == 0)) || calls=(--calls "$outdir/callprof.tsv")
	python3 "$here/callback_ab.py" "$outdir/callback-ab.tsv" "${AB_REF:-$last}" "${calls[@]}" |
		tee "$outdir/callback-ab.txt"
else
	echo "callback-ab: no measurements; the guest's log:" >&2
	cat "$outdir/log" >&2 2>/dev/null || true
	rc=1
fi
exit "$rc"
