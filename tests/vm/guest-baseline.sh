#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh): the scheduler-independent baseline, under the
# kernel's default scheduler (EEVDF).
#   - the VM looks as intended: 2 nodes x 2 CPUs, NVMe on node 1, sched_ext
#     present and disabled;
#   - the measurement works: bpftrace counts as many bios as fio issued, and
#     fio pinned to node 0's CPUs submits >= 95 % of its bios from node 0;
#   - the figures the scheduler has to beat: node shares of unpinned fio;
#   - scx_esn observe (no scheduler) calls node-0-pinned fio ~100 % remote
#     and node-1-pinned fio ~100 % local, counting what bpftrace counts.
# Environment: ESN_FIO_RUNTIME (s, default 15); ESN_BASELINE_MORE=1 also
# measures 4 and 8 jobs.
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

runtime=${ESN_FIO_RUNTIME:-15}
limit=$((runtime + 60))

say "baseline on $(uname -r); scheduler: default (EEVDF)"

# --- the VM itself ----------------------------------------------------------
if [[ -d /sys/kernel/sched_ext ]]; then
	st=$(cat /sys/kernel/sched_ext/state)
	check "sched_ext present, state disabled" "$([[ $st == disabled ]] && echo 1 || echo 0)" "state=$st"
else
	check "sched_ext present, state disabled" 0 "/sys/kernel/sched_ext missing"
fi

numactl -H | sed 's/^/    /'
nodes=$(numactl -H | awk '/^available:/ { print $2 }')
cpus0=$(numactl -H | awk '/^node 0 cpus:/ { $1 = $2 = $3 = ""; print }' | xargs)
cpus1=$(numactl -H | awk '/^node 1 cpus:/ { $1 = $2 = $3 = ""; print }' | xargs)
sockets=$(lscpu | awk -F: '/^Socket\(s\)/ { gsub(/ /, "", $2); print $2 }')
ok=0
[[ $nodes == 2 && $cpus0 == "0 1" && $cpus1 == "2 3" ]] && ok=1
check "2 NUMA nodes x 2 CPUs" "$ok" "nodes=$nodes node0=[$cpus0] node1=[$cpus1] sockets=$sockets"
dist=$(numactl -H | awk '$1 == "0:" { print $3 }')
check "node distance 0->1 is 20" "$([[ $dist == 20 ]] && echo 1 || echo 0)" "distance=$dist"

dev=$(nvme_dev_on_node 1) || dev=
ctrl_node=$(cat /sys/class/nvme/nvme0/device/numa_node 2>/dev/null || echo none)
check "nvme0 on node 1" "$([[ $ctrl_node == 1 && -b $dev ]] && echo 1 || echo 0)" \
	"nvme0/device/numa_node=$ctrl_node dev=${dev:-none}"
if [[ -z $dev || ! -b $dev ]]; then
	say "no NVMe block device on node 1; cannot measure"
	ls -l /sys/class/nvme/ /dev/nvme* 2>&1
	finish
fi

# --- the measurement ----------------------------------------------------------
if ! bio_trace_start "$dev"; then
	check "bpftrace attaches" 0 "no marker within ${ESN_BT_ATTACH_TIMEOUT}s"
	finish
fi

fio_issued() { # total I/Os the last fio run issued
	grep -o 'issued rwts: total=[0-9]*' "$ESN_WORK/commands.log" | tail -n1 | sed 's/.*=//'
}

# Unpinned, 2 jobs: where does EEVDF put fio?
fio_randread_args "$dev" 2 "$runtime"
measure_bios_during "$limit" -- "${FIO[@]}"
issued=$(fio_issued)
iops=$(fio_iops)
check "fio 2 jobs unpinned ran" "$([[ $MB_RC == 0 && $MB_TOTAL -gt 100 ]] && echo 1 || echo 0)" \
	"exit=$MB_RC bios=$MB_TOTAL IOPS=$iops"
check "EEVDF 2 jobs: bios from node 1" info "$MB_PCT1 % (node0 $MB_PCT0 %, $MB_TOTAL bios)"
# Every bio fio issued should have been counted (bpftrace is the referee).
ok=$(awk -v a="$MB_TOTAL" -v b="${issued:-0}" 'BEGIN { d = a - b; if (d < 0) d = -d; print (b > 0 && d <= 0.001 * b + 2) ? 1 : 0 }')
check "bios counted == fio issued I/Os" "$ok" "bpftrace $MB_TOTAL, fio issued ${issued:-?}"
tid_split fio 80
check "EEVDF 2 jobs: jobs mostly on node 1" info "$MB_JOBS_N1 of $MB_JOBS (mostly node 0: $MB_JOBS_N0)"

if [[ ${ESN_BASELINE_MORE:-0} == 1 ]]; then
	for jobs in 4 8; do
		fio_randread_args "$dev" "$jobs" "$runtime"
		measure_bios_during "$limit" -- "${FIO[@]}"
		tid_split fio 80
		check "EEVDF $jobs jobs: bios from node 1" info \
			"$MB_PCT1 % ($MB_TOTAL bios, IOPS=$(fio_iops), jobs mostly node1 $MB_JOBS_N1/$MB_JOBS)"
	done
fi

# Started on node 0, then allowed everywhere: does EEVDF move fio next to the
# device? (Unpinned placement alone is luck: idle CPUs on both nodes.)
fio_randread_args "$dev" 2 "$((runtime + 3))"
MB_SKIP=4 measure_bios_during "$limit" -- run_pinned_then_free 0-1 3 0-3 "${FIO[@]}"
tid_split fio 80
check "EEVDF 2 jobs started on node 0, then free: node 1" info \
	"$MB_PCT1 % of $MB_TOTAL bios after the first $MB_SKIPPED s; jobs mostly node1 $MB_JOBS_N1/$MB_JOBS"

# observe's view of a pinned run, checked against bpftrace's bio count.
# check_observe NAME WANT(local|remote)
check_observe() {
	local name=$1 want=$2 ok=0 pct
	observe_stop || true
	pct=$OBS_REMOTE_PCT
	[[ $want == local ]] && pct=$(awk -v p="$OBS_REMOTE_PCT" 'BEGIN { print (p < 0) ? -1 : 100 - p }')
	[[ $OBS_RC == 0 ]] && pct_ge "$pct" 95 && ok=1
	check "observe $name: >= 95 % of nvme requests $want" "$ok" \
		"$pct % $want of $OBS_REQS requests; latency $OBS_LAT; $OBS_NODES"
	ok=$(awk -v a="$OBS_REQS" -v b="$MB_TOTAL" 'BEGIN { d = a - b; if (d < 0) d = -d; print (b > 100 && d <= 0.05 * b) ? 1 : 0 }')
	check "observe $name: requests within 5 % of bpftrace's bios" "$ok" "observe $OBS_REQS, bpftrace $MB_TOTAL"
}

# Pinned to node 0's CPUs: the measurement must say node 0, and
# scx_esn observe must call ~all of it remote to the NVMe on node 1.
fio_randread_args "$dev" 2 "$runtime"
obs=0
observe_start "$dev" && obs=1
measure_bios_during "$limit" -- taskset -c 0-1 "${FIO[@]}"
issued=$(fio_issued)
ok=0
[[ $MB_RC == 0 && $MB_TOTAL -gt 100 ]] && pct_ge "$MB_PCT0" 95 && ok=1
check "pinned 0-1: >= 95 % bios from node 0" "$ok" "$MB_PCT0 % ($MB_TOTAL bios, fio issued ${issued:-?}, IOPS=$(fio_iops), exit $MB_RC)"
if ((obs)); then check_observe "pinned 0-1" remote; else check "observe pinned 0-1: starts" 0 "see the log"; fi

# And pinned to node 1's CPUs: node 1, and local for observe.
obs=0
observe_start "$dev" && obs=1
measure_bios_during "$limit" -- taskset -c 2-3 "${FIO[@]}"
ok=0
[[ $MB_RC == 0 && $MB_TOTAL -gt 100 ]] && pct_ge "$MB_PCT1" 95 && ok=1
check "pinned 2-3: >= 95 % bios from node 1" "$ok" "$MB_PCT1 % ($MB_TOTAL bios, IOPS=$(fio_iops), exit $MB_RC)"
if ((obs)); then check_observe "pinned 2-3" local; else check "observe pinned 2-3: starts" 0 "see the log"; fi

bio_trace_stop
finish
