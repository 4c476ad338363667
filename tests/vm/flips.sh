#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# How often does the guest kernel die of the TCG text-poke race ("Oops: int3"
# at a static-key site, outside BPF code)? N boots of guest-flips.sh (each
# loads and unloads scx_esn ESN_FLIPS times under fio), with no retries, in
# one TCG mode; prints one line per boot and the counts.
#
# usage: tests/vm/flips.sh [N (20)] [single|multi (single)]
# Results: build/vm/results/flips-MODE-I/. Exit 0 only if every boot passed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
vmdir=${ESN_VM_DIR:-$repo/build/vm}
boots=${1:-20}
mode=${2:-single}
flips=${ESN_FLIPS:-5}

bash "$here/setup.sh" || exit 1
pass=0 race=0 other=0 t0=$SECONDS
for i in $(seq "$boots"); do
	out=$vmdir/results/flips-$mode-$i
	rm -rf "$out"
	mkdir -p "$out"
	tb=$SECONDS
	ESN_VM_RETRIES=0 ESN_VM_TCG_THREAD=$mode ESN_VM_QUIET=1 \
		bash "$here/run-in-vm.sh" "$here/guest-flips.sh" "$out" "ESN_FLIPS=$flips" >"$out/run.log" 2>&1
	if [[ $(head -n1 "$out/result" 2>/dev/null) == PASS ]]; then
		verdict=pass
		pass=$((pass + 1))
	elif grep -h 'Oops: int3' "$out"/console*.log >/dev/null 2>&1; then
		verdict="text-poke race ($(grep -h -m1 -A12 'Oops: int3' "$out"/console*.log | grep -m1 -o 'RIP: [0-9a-f]*:[^ ]*'))"
		race=$((race + 1))
	else
		verdict="failed: $(grep -m1 -h FAIL "$out/summary.tsv" "$out/log" 2>/dev/null || echo 'see run.log')"
		other=$((other + 1))
	fi
	echo "boot $i/$boots ($mode TCG, $((SECONDS - tb)) s): $verdict"
done
echo "flips: $boots boots x $flips load/unload cycles, $mode-threaded TCG, $((SECONDS - t0)) s: pass $pass, text-poke race $race, other failures $other"
((pass == boots))
