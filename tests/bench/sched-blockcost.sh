#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# What scx_esn's block programs cost per completed request while it runs as
# the scheduler, against bpftrace's biolatency-style script on the same
# requests (issue 16, scheduler mode). The host's kernel has no sched_ext, so
# the run happens in the 2-node VM (tests/vm/run-in-vm.sh), guest side in
# guest-sched-blockcost.sh. Figures from an emulated machine are inflated;
# read the ratios, which come from one run.
#
# Usage: tests/bench/sched-blockcost.sh [SECONDS]   (fio runtime, default 20)
# Environment: ESN_BIN, another scx_esn build to measure (default
# target/release/scx_esn; the guest sees the host's files at the same paths).
# Needs: make build, tests/vm/setup.sh. Report: build/bench/sched-blockcost/
# sched-blockcost.txt. Exit 0 when the measurement was taken, 1 otherwise.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
runtime=${1:-20}
[[ $runtime =~ ^[1-9][0-9]*$ ]] || {
	echo "usage: $0 [SECONDS]  (whole seconds of fio load, default 20)" >&2
	exit 2
}
guest_env=(ESN_COST_SECONDS="$runtime")
if [[ -n ${ESN_BIN:-} ]]; then
	[[ -x $ESN_BIN ]] || {
		echo "sched-blockcost: ESN_BIN=$ESN_BIN is not an executable file" >&2
		exit 2
	}
	guest_env+=(ESN_BIN="$(realpath "$ESN_BIN")")
fi
outdir=$repo/build/bench/sched-blockcost
rm -rf "$outdir"
rc=0
ESN_VM_QUIET=1 "$repo/tests/vm/run-in-vm.sh" "$here/guest-sched-blockcost.sh" "$outdir" \
	"${guest_env[@]}" || rc=$?
if [[ -s $outdir/sched-blockcost.txt ]]; then
	cat "$outdir/sched-blockcost.txt"
else
	echo "sched-blockcost: no report; the guest's log:" >&2
	cat "$outdir/log" >&2 2>/dev/null || true
fi
exit "$rc"
