#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# The VM tests' entry point (Makefile / CI):
#   setup.sh, then one boot each for guest-baseline.sh, guest-scheduler.sh,
#   guest-fairness.sh, guest-control.sh, guest-edges.sh (the odd machine:
#   one node, no NVMe; and the command lines and states an operator gets
#   wrong), guest-async.sh (libaio and io_uring submitters, booted with
#   nvme.poll_queues=1) and guest-fabrics.sh (an NVMe/TCP disk, two NICs
#   joined by a wire)
#   (or guest-observe.sh alone: `observe`, for kernels without sched_ext;
#   guest-scripts.sh: `scripts`, the bpftrace scripts of scripts/;
#   guest-soak.sh: `soak`, the fault soak, ESN_SOAK_SECS=N long).
# usage: tests/vm/run.sh [all|baseline|scheduler|fairness|control|edges|async|fabrics|soak|observe|scripts|lab] [NAME=VALUE ...]
#   NAME=VALUE pairs go to the guest scripts (e.g. ESN_DRY=1, ESN_FIO_RUNTIME=10).
# Results: build/vm/results/<test>/ (log, summary.tsv, result, console.log, ...).
# Exit status: 0 only if every test that ran passed.
# Environment: ESN_VM_DIR (default build/vm) and ESN_KERNEL_VERSION go to
# setup.sh; ESN_KERNEL_OPTIONAL=1 turns "that kernel is no longer in the
# archive" into a loud skip instead of a failure (for pinned older kernels).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
vmdir=${ESN_VM_DIR:-$repo/build/vm}
results="$vmdir/results"

what=all
if (($#)) && [[ $1 != *=* ]]; then what=$1; shift; fi
case $what in
all) tests=(baseline scheduler fairness control edges async fabrics) ;;
baseline | scheduler | fairness | control | edges | async | fabrics | soak | observe | scripts | lab) tests=("$what") ;;
*) echo "usage: $0 [all|baseline|scheduler|fairness|control|edges|async|fabrics|soak|observe|scripts|lab] [NAME=VALUE ...]" >&2; exit 2 ;;
esac

declare -A verdict secs
t_start=$(date +%s)

t0=$(date +%s)
bash "$here/setup.sh"
setup_rc=$?
if ((setup_rc == 3)) && [[ ${ESN_KERNEL_OPTIONAL:-0} == 1 ]]; then
	echo "vm-tests: SKIPPED: kernel ${ESN_KERNEL_VERSION:-?} is no longer in the archive; update the pinned version"
	exit 0
elif ((setup_rc != 0)); then
	echo "vm-tests: setup.sh failed" >&2
	exit 1
fi
secs[setup]=$(($(date +%s) - t0))

rc=0
for t in "${tests[@]}"; do
	out="$results/$t"
	rm -rf "$out"
	mkdir -p "$out"
	echo
	echo "########## VM test: $t ##########"
	t0=$(date +%s)
	# The edges test needs the odd machine; the others the 2-node one
	# unless ESN_VM_TOPOLOGY says otherwise.
	topology=${ESN_VM_TOPOLOGY:-2n}
	[[ $t == edges ]] && topology=1n
	# io_uring's IOPOLL needs a polled NVMe queue.
	append=${ESN_VM_APPEND:-}
	[[ $t == async ]] && append="$append nvme.poll_queues=1"
	# An NVMe/TCP target needs a wire.
	net_loop=${ESN_VM_NET_LOOP:-0}
	[[ $t == fabrics ]] && net_loop=1
	if ESN_VM_NET_LOOP=$net_loop ESN_VM_APPEND=$append ESN_VM_TOPOLOGY=$topology bash "$here/run-in-vm.sh" "$here/guest-$t.sh" "$out" "$@"; then
		verdict[$t]=PASS
	else
		verdict[$t]=FAIL
		rc=1
	fi
	secs[$t]=$(($(date +%s) - t0))
done

echo
echo "==================== VM tests ===================="
# shellcheck disable=SC1091
. "$vmdir/kernel.env"
echo "kernel: $KVER ($KSUITE)"
printf '%-10s %-5s %6s  %s\n' setup ok "${secs[setup]}s" ""
for t in "${tests[@]}"; do
	timing=$(cat "$results/$t/timing" 2>/dev/null || true)
	printf '%-10s %-5s %6s  %s\n' "$t" "${verdict[$t]}" "${secs[$t]}s" "$timing"
done
for t in "${tests[@]}"; do
	if [[ -s $results/$t/summary.tsv ]]; then
		echo "--- $t"
		awk -F'\t' '{ printf "  %-5s %-50s %s\n", $1, $2, $3 }' "$results/$t/summary.tsv"
	fi
done
echo "total: $(($(date +%s) - t_start))s; results in ${results#"$repo"/}/"
echo "=================================================="
# A closing line in the plain form CI tools read.
n_pass=0 n_fail=0
for t in "${tests[@]}"; do
	if [[ ${verdict[$t]} == PASS ]]; then n_pass=$((n_pass + 1)); else n_fail=$((n_fail + 1)); fi
done
echo "vm: $n_pass passed, $n_fail failed"
exit "$rc"
