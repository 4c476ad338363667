#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script for `make demo`: the same fio load (4k randread, direct, psync,
# 2 jobs) on the node-1 NVMe, started on node 0's CPUs and then allowed
# everywhere, first under the kernel's default scheduler, then under scx_esn
# --threshold 2, each measured by the bpftrace count of which node submitted
# the bios (the first seconds, while the jobs are still pinned, are left out).
# Shows scx_esn's own --stats lines beside it.
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

bin=$ESN_REPO/target/release/scx_esn
jobs=${ESN_DEMO_JOBS:-2}
runtime=${ESN_FIO_RUNTIME:-15}
export MB_SKIP=7

[[ -x $bin ]] || { say "no $bin: run make first"; echo FAIL >"$ESN_OUTDIR/result"; exit 1; }
dev=$(nvme_dev_on_node 1) || { say "no NVMe on node 1"; echo FAIL >"$ESN_OUTDIR/result"; exit 1; }

say "topology as scx_esn sees it:"
"$bin" topology
fio_randread_args "$dev" "$jobs" "$((runtime + 7))"
run_load() { run_pinned_then_free 0-1 3 0-3 "${FIO[@]}"; }
# busiest_stats_interval FILE: of the --stats text intervals in FILE (each
# from its "place " counter line to its "requests:" line), print the one with
# the most requests started.
busiest_stats_interval() {
	awk '/^place / { block = "" }
		{ block = block $0 "\n" }
		/^requests: / && $2 + 0 >= most { most = $2 + 0; best = block }
		END { printf "%s", best }' "$1"
}
# capture_top: `scx_esn top` in a tmux pane, under the same load once more
# (not during the measured run: top's own CPU time would be charged to
# scx_esn), each of its three views captured with its colours to
# top-{nodes,devices,tasks}.ansi (demo.sh renders them) and as text.
capture_top() {
	local sock=$ESN_WORK/tmux-demo.sock session=esn-demo-top view fio_pid
	command -v tmux >/dev/null || { say "no tmux: top is not captured"; return 0; }
	"${FIO[@]}" --output=/dev/null >/dev/null 2>&1 &
	fio_pid=$!
	tmux -S "$sock" -f /dev/null new-session -d -s "$session" -x 112 -y 34 \
		"$bin top --interval 1 2>$ESN_OUTDIR/top.stderr"
	sleep 10
	for view in nodes devices tasks; do
		tmux -S "$sock" capture-pane -e -p -t "$session" >"$ESN_OUTDIR/top-$view.ansi"
		tmux -S "$sock" capture-pane -p -t "$session" >"$ESN_OUTDIR/top-$view.txt"
		tmux -S "$sock" send-keys -t "$session" Tab
		sleep 3
	done
	tmux -S "$sock" send-keys -t "$session" q
	sleep 1
	tmux -S "$sock" kill-server 2>/dev/null
	wait "$fio_pid"
	say "scx_esn top under the same load (nodes view; devices and tasks in top-*.txt):"
	sed -e 's/[[:space:]]*$//' "$ESN_OUTDIR/top-nodes.txt"
}
bio_trace_start "$dev" || { echo FAIL >"$ESN_OUTDIR/result"; exit 1; }

say "=== default scheduler (EEVDF): fio $jobs jobs on $dev, started on node 0 then freed ==="
measure_bios_during $((runtime + 60)) -- run_load
eevdf_pct1=$MB_PCT1 eevdf_iops=$(fio_iops)
tid_split fio 80
eevdf_jobs="$MB_JOBS_N1 of $MB_JOBS mostly on node 1"

say "=== scx_esn --threshold 2: the same load ==="
"$bin" --threshold 2 --stats 1 >"$ESN_OUTDIR/scx_esn.stdout" 2>"$ESN_OUTDIR/scx_esn.stderr" &
pid=$!
for _ in $(seq 1 60); do
	[[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.5
done
say "sched_ext: $(cat /sys/kernel/sched_ext/state), ops $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"
measure_bios_during $((runtime + 60)) -- run_load
esn_pct1=$MB_PCT1 esn_iops=$(fio_iops)
tid_split fio 80
esn_jobs="$MB_JOBS_N1 of $MB_JOBS mostly on node 1"
capture_top
kill -INT "$pid"
for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
wait "$pid"
rc=$?
bio_trace_stop

# The last interval comes after the load (nothing submitted then): show the
# one interval that saw the most requests started, which lies inside it.
say "scx_esn --stats, its busiest interval during the load:"
busiest_stats_interval "$ESN_OUTDIR/scx_esn.stdout"
say "scx_esn stderr:"
cat "$ESN_OUTDIR/scx_esn.stderr"
echo
printf '%-22s %-24s %-10s %s\n' scheduler "bios from node 1 (NVMe)" IOPS "fio jobs"
printf '%-22s %-24s %-10s %s\n' "EEVDF" "$eevdf_pct1 %" "$eevdf_iops" "$eevdf_jobs"
printf '%-22s %-24s %-10s %s\n' "scx_esn --threshold 2" "$esn_pct1 %" "$esn_iops" "$esn_jobs"
say "scx_esn exited $rc, sched_ext state $(cat /sys/kernel/sched_ext/state)"
if ((rc == 0)); then echo PASS >"$ESN_OUTDIR/result"; else echo FAIL >"$ESN_OUTDIR/result"; fi
