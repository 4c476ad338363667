#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# The NUMA benchmark: boots the lab VM (tests/vm) once per topology and, in
# that boot, runs EEVDF, the sched_ext floor (tests/floor: no BPF callbacks;
# smoke and quick runs),
# scx_esn (learned), scx_esn --threshold 1..C (the oracle sweep; C = CPUs of
# the device's node) and the sched_ext peers
# (tests/bench/peers.sh) on the same loads, interleaved, with the NUMA lab's
# remote penalty off or on (tests/lab). See tests/bench/README.md.
#
#   tests/bench/numa-bench.sh              the full run (both topologies)
#   BENCH_QUICK=1 tests/bench/numa-bench.sh   one topology, one penalty, 1 repeat
#   BENCH_SMOKE=1 tests/bench/numa-bench.sh   one point per scheduler (make test)
#
# Results: raw points in build/bench/numa/<name>/raw.jsonl; the report
# (tests/bench/report.py) in bench/results/<name>.md with its plots in
# bench/results/<name>/ (smoke: under build/bench/smoke/, not meant to be
# committed). <name> is <date>-<topology>, plus -quick or -smoke for those
# modes, plus -<BENCH_TAG>. Any BENCH_* variable of guest_bench.py given in
# the environment overrides the mode's choice. BENCH_ESN_BASE=<scx_esn build>
# with esn-base in BENCH_SCHEDULERS runs a second build beside this one.
# Exit status: 0 when every boot finished with a measured point for every
# scheduler (a failed point is reported, not fatal), 1 otherwise, 2 on setup
# errors. Root only (qemu, BPF in the guest).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

die() { echo "numa-bench: $*" >&2; exit 2; }
say() { echo "numa-bench: $*"; }

[[ $(id -u) == 0 ]] || die "needs root (qemu with /dev files, BPF inside the guest)"
for f in target/release/scx_esn target/release/esn-remote-penalty target/release/esn-scx-floor; do
	[[ -x $repo/$f ]] || die "no $f: run 'make build' first"
done

# Mode: what runs, per topology. The full matrix is in docs/TESTING.md with its cost.
if [[ ${BENCH_SMOKE:-0} == 1 ]]; then
	mode=smoke topologies=${BENCH_TOPOLOGIES:-2n} timeout=1800
	defaults() { # TOPOLOGY
		d_penalties="2.0" d_light="" d_loads="io-2" d_repeats=1 d_runtime=4 d_ramp=1
		# Every way scx_esn can run, --objective throughput included, loads and runs.
		d_scheds="eevdf floor esn esn-tput oracle scx_bpfland scx_rusty scx_cosmos"
	}
elif [[ ${BENCH_QUICK:-0} == 1 ]]; then
	mode=quick topologies=${BENCH_TOPOLOGIES:-2n} timeout=3600
	defaults() {
		d_penalties="2.0" d_light="" d_loads="io-1 io-2 io-4 io-8 hog-io-4 cpu wakeup"
		d_repeats=1 d_runtime=8 d_ramp=2
		d_scheds="eevdf floor esn oracle scx_bpfland scx_rusty scx_cosmos"
	}
else
	mode=full topologies=${BENCH_TOPOLOGIES:-2n 4n} timeout=14400
	defaults() {
		d_repeats=3 d_runtime=10 d_ramp=2 d_light=""
		# Not the floor: an 8th scheduler would take the run past 3 hours.
		d_scheds="eevdf esn oracle scx_bpfland scx_rusty scx_cosmos"
		if [[ $1 == 2n ]]; then
			d_penalties="off 2.0" d_light="1.1"
			d_loads="io-1 io-2 io-4 io-8 aio-8 hog-io-4 cpu hackbench wakeup"
		else
			d_penalties="2.0" d_loads="io-2 io-4 io-8 hog-io-4"
		fi
	}
fi

bash "$repo/tests/vm/setup.sh" || die "tests/vm/setup.sh failed"
# The peers take minutes each to build on a fresh machine: not when
# BENCH_SCHEDULERS leaves them all out.
if [[ -z ${BENCH_SCHEDULERS:-} || ${BENCH_SCHEDULERS} == *scx_* ]]; then
	mapfile -t peer_bins < <(bash "$here/peers.sh") || die "building the peer schedulers failed (tests/bench/peers.sh)"
	say "peers: ${peer_bins[*]}"
fi

date=$(date -u +%F)
rc=0
# The command as given, for the report: the mode and every BENCH_* override.
overrides=$(env | grep -E '^BENCH_[A-Z_]+=' | grep -vE '^BENCH_(QUICK|SMOKE|TOPOLOGIES)=' |
	sort | sed -E 's/^([^=]+)=(.*)$/\1="\2" /' | tr -d '\n')
for topo in $topologies; do
	defaults "$topo"
	# A quick or smoke run is named apart, so it never replaces (nor, with
	# its rm -rf, deletes the raw points of) the day's full run.
	name=$date-$topo$([[ $mode != full ]] && echo "-$mode")${BENCH_TAG:+-$BENCH_TAG}
	raw_dir=$repo/build/bench/numa/$name
	if [[ $mode == smoke ]]; then
		md=$repo/build/bench/smoke/$name.md plots=$repo/build/bench/smoke/$name
	else
		md=$repo/bench/results/$name.md plots=$repo/bench/results/$name
	fi
	rm -rf "$raw_dir"
	mkdir -p "$raw_dir" "$(dirname "$md")"
	t0=$(date +%s)
	say "$mode run on $topo: results in ${raw_dir#"$repo"/}"
	# A scheduler load or unload under TCG kills the guest now and then (the
	# text-poke race, tests/vm/README.md): boot again, and the guest resumes
	# after the last recorded point, until it writes "end" or stops progressing.
	boots=0 stalled=0
	while :; do
		before=$(grep -c '"kind": "point"' "$raw_dir/raw.jsonl" 2>/dev/null || true)
		boots=$((boots + 1))
		ESN_VM_TOPOLOGY=$topo ESN_VM_TIMEOUT=$timeout ESN_VM_QUIET=1 \
			bash "$repo/tests/vm/run-in-vm.sh" "$here/guest-bench.sh" "$raw_dir" \
			BENCH_RAW="$raw_dir/raw.jsonl" BENCH_MODE=$mode \
			BENCH_PENALTIES="${BENCH_PENALTIES:-$d_penalties}" \
			BENCH_LIGHT_PENALTIES="${BENCH_LIGHT_PENALTIES:-$d_light}" \
			BENCH_LOADS="${BENCH_LOADS:-$d_loads}" BENCH_REPEATS="${BENCH_REPEATS:-$d_repeats}" \
			BENCH_RUNTIME="${BENCH_RUNTIME:-$d_runtime}" BENCH_RAMP="${BENCH_RAMP:-$d_ramp}" \
			BENCH_SCHEDULERS="${BENCH_SCHEDULERS:-$d_scheds}" \
			BENCH_ESN_BASE="${BENCH_ESN_BASE:-}" BENCH_BPF_STATS="${BENCH_BPF_STATS:-1}" \
			BENCH_BPF_SAMPLE_MS="${BENCH_BPF_SAMPLE_MS:-100}" \
			BENCH_WAKE_PROBE="${BENCH_WAKE_PROBE:-0}" BENCH_NODE_TASKS="${BENCH_NODE_TASKS:-0}"
		boot_rc=$?
		grep -E '^\[ *[0-9.]+\] (point|bench)' "$raw_dir/log" 2>/dev/null | tail -n 400
		grep -q '"kind": "end"' "$raw_dir/raw.jsonl" 2>/dev/null && break
		after=$(grep -c '"kind": "point"' "$raw_dir/raw.jsonl" 2>/dev/null || true)
		((after > before)) && stalled=0 || stalled=$((stalled + 1))
		if ((stalled >= 2 || boots >= ${BENCH_MAX_BOOTS:-15})); then
			say "$topo: giving up after $boots boots ($after points recorded)"
			break
		fi
		say "$topo: the guest died after $after points (boot $boots); booting again to resume"
	done
	awk -F'\t' '{ printf "  %-5s %-35s %s\n", $1, $2, $3 }' "$raw_dir/summary.tsv" 2>/dev/null
	if [[ -s $raw_dir/raw.jsonl ]]; then
		/usr/bin/python3 "$here/report.py" "$raw_dir/raw.jsonl" "$md" "$plots" \
			--command "$([[ $mode != full ]] && echo "BENCH_${mode^^}=1 ")${overrides}tests/bench/numa-bench.sh (BENCH_TOPOLOGIES=$topo)" ||
			{ say "report.py failed on $raw_dir/raw.jsonl"; rc=1; }
	fi
	((boot_rc == 0)) || rc=1
	say "$topo: $mode run $( ((boot_rc == 0)) && echo passed || echo FAILED) in $(($(date +%s) - t0)) s"
done
exit "$rc"
