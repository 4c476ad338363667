# SPDX-License-Identifier: GPL-2.0-only
#
# Sourced by observe-cost.sh and guest-sched-blockcost.sh: the two bpftrace
# processes scx_esn's block programs are measured against, started together.
#   bpftrace biolatency-baseline.bt   the biolatency-style script (the target's
#                                     yardstick);
#   an empty probe on block_rq_issue  the floor: what the kernel's accounting
#                                     and a program call cost, nothing more.
# Both print "esn-bench: attached" from BEGIN (their probes may attach later).

# start_bpftrace_pair BT_OUT BT_ERR FLOOR_OUT FLOOR_ERR: sets bt_pid, floor_pid.
start_bpftrace_pair() {
	local dir
	dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	bpftrace -B line "$dir/biolatency-baseline.bt" >"$1" 2>"$2" &
	bt_pid=$!
	bpftrace -B line -e 'BEGIN { printf("esn-bench: attached\n"); }
	tracepoint:block:block_rq_issue { }' >"$3" 2>"$4" &
	floor_pid=$!
}
