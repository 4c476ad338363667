#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh): asynchronous and polled I/O submitters are
# placed like psync ones. 2-node guest, the NVMe on node 1, booted with
# nvme.poll_queues=1 (tests/vm/run.sh) so io_uring's IOPOLL has a polled
# queue. Each engine runs fio 2 jobs, 4k random reads at iodepth 8,
# unpinned, ESN_FIO_RUNTIME seconds, first under EEVDF (the reference, same
# boot), then under scx_esn (ESN_SCHED_ARGS, default --threshold 2, so both
# jobs' submitters fit node 1). The referee is bpftrace's count of which
# node, and which thread, submitted the bios:
#   A. libaio: >= 90 % of the bios from node 1;
#   U. io_uring, submissions from fio's threads: >= 90 % from node 1;
#   Q. io_uring with sqthread_poll=1: the kernel's iou-sqp threads submit
#      (>= 90 % of the bios; they are the tasks scx_esn must place), and
#      >= 90 % from node 1. They poll the submission ring: the kernel's
#      accounting (/proc) shows them >= 100 % of a CPU between them, and
#      `scx_esn energy` (the model) reads node 1 >= 80 W meanwhile;
#   P. io_uring with hipri (IOPOLL): fio's job processes poll for their
#      completions; the disk has a polled queue (queue/io_poll 1), fio ends
#      without an error, >= 90 % of the bios from node 1. Polling is CPU
#      time: the kernel's accounting of fio's processes (/proc) shows >= 100 %
#      of a CPU while `scx_esn energy` (the model) reads node 1, where they
#      are placed, >= 80 W (95 W busy, 47 W idle per socket).
#   L. scx_esn is still loaded at the end, with no sched_ext error in dmesg.
# Environment: ESN_BIN, ESN_SCHED_ARGS, ESN_LOAD_TIMEOUT (30),
# ESN_FIO_RUNTIME (15), ESN_ASYNC_ENGINES (A U Q P: the ones to run).
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

sched_script_vars
engines=" ${ESN_ASYNC_ENGINES:-A U Q P} "
clk_tck=$(getconf CLK_TCK)

finish_all() {
	sched_cleanup 30
	finish
}

runs() { [[ $engines == *" $1 "* ]]; } # ENGINE: was it asked for?

# fio_args ENGINE: FIO for one engine's run.
fio_args() {
	case $1 in
	A) fio_randread_args "$dev" 2 "$runtime" --ioengine=libaio --iodepth=8 ;;
	U) fio_randread_args "$dev" 2 "$runtime" --ioengine=io_uring --iodepth=8 ;;
	Q) fio_randread_args "$dev" 2 "$runtime" --ioengine=io_uring --iodepth=8 --sqthread_poll=1 ;;
	P) fio_randread_args "$dev" 2 "$runtime" --ioengine=io_uring --iodepth=8 --hipri ;;
	esac
}

engine_name() {
	case $1 in
	A) echo libaio ;;
	U) echo io_uring ;;
	Q) echo "io_uring SQPOLL" ;;
	P) echo "io_uring IOPOLL" ;;
	esac
}

# The bios of threads whose name starts with PREFIX, in % of the run's
# (MB_TIDFILE of the last measure_bios_during).
share_of_comm() { # PREFIX
	awk -v pre="$1" -v total="$MB_TOTAL" '
		index($2, pre) == 1 { n += $3 + $4 }
		END { printf "%.1f", total ? 100 * n / total : 0 }' "$MB_TIDFILE"
}

# "TID TICKS" for each task (threads included) whose name starts with
# PREFIX: its CPU time so far.
tasks_named() { # PREFIX
	local files f
	mapfile -t files < <(grep -l "^$1" /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null)
	for f in "${files[@]}"; do
		f=${f%comm}stat
		awk '{ print $1, $14 + $15 }' "$f" 2>/dev/null
	done
}

# The node 1 watts of `scx_esn energy --json` (the model), or -1.
node1_watts() { # JSON
	python3 -c 'import json, sys
e = json.loads(sys.argv[1])
print(next((n["watts"] for n in e["nodes"] if n["node"] == 1), -1) if e.get("source") == "estimated" else -1)' "$1" 2>/dev/null || echo -1
}

# busy_during PREFIX N: beside a run, once N tasks named PREFIX* exist (fio
# takes seconds to start under TCG), writes to $ESN_WORK/busy node 1's
# watts over 4 s (`scx_esn energy`) and those tasks' CPU time in % of one
# CPU meanwhile (the kernel's accounting, /proc).
busy_during() {
	local prefix=$1 want=$2 json i n up0 up1
	for ((i = 0; i < 120; i++)); do
		n=$(tasks_named "$prefix" | wc -l)
		((n >= want)) && break
		sleep 0.5
	done
	sleep 1
	tasks_named "$prefix" >"$ESN_WORK/busy.t0"
	read -r up0 _ </proc/uptime
	json=$(timeout 30 "$bin" energy --duration 4 --json 2>/dev/null)
	tasks_named "$prefix" >"$ESN_WORK/busy.t1"
	read -r up1 _ </proc/uptime
	# The tasks there at both ends, over the wall time the meter took (it
	# starts slowly under TCG).
	echo "$(node1_watts "$json") $(awk -v hz="$clk_tck" -v s="$up0" -v e="$up1" '
		FNR == NR { t0[$1] = $2; next }
		($1 in t0) { d += $2 - t0[$1] }
		END { printf "%.0f", (e > s) ? 100 * d / hz / (e - s) : 0 }' "$ESN_WORK/busy.t0" "$ESN_WORK/busy.t1")" >"$ESN_WORK/busy"
}

# run_engine LABEL ENGINE: one measured fio run; sets RUN_PCT1 RUN_RC RUN_FIG.
run_engine() {
	local label=$1 e=$2 helper=
	fio_args "$e"
	# Room for the busy measurement once fio has started (slow under TCG).
	[[ $label == scx_esn && ($e == Q || $e == P) ]] && FIO+=(--runtime=$((runtime + 10)))
	: >"$ESN_WORK/busy"
	if [[ $label == scx_esn ]]; then
		case $e in
		Q) busy_during iou-sqp- 2 & helper=$! ;;
		P) busy_during fio 3 & helper=$! ;; # fio's parent and its 2 jobs
		esac
	fi
	MB_SKIP=${ESN_SETTLE_INTERVALS:-2} measure_bios_during $((runtime + 70)) -- "${FIO[@]}" ||
		{ check "$e measurement" 0 "bpftrace failed"; finish_all; }
	[[ -n $helper ]] && wait "$helper"
	RUN_PCT1=$MB_PCT1 RUN_RC=$MB_RC
	RUN_FIG="$MB_PCT1 % of $MB_TOTAL bios from node 1, fio exit $MB_RC"
	say "$label $(engine_name "$e"): $RUN_FIG"
	if grep -qE 'fio: .*(error|not supported)|err= *[1-9]' "$ESN_WORK/commands.log"; then
		say "fio reported: $(grep -m2 -E 'fio: |err=' "$ESN_WORK/commands.log" | tr '\n' ' ')"
	fi
}

say "async/polled I/O test on $(uname -r); bin=$bin ${sched_args[*]}"
require_nvme_and_sched_ext
[[ -x $bin ]] || { check "scx_esn binary" 0 "not found at $bin; run make first"; finish_all; }
poll=$(cat "/sys/block/$(basename "$dev")/queue/io_poll" 2>/dev/null || echo 0)
say "disk $dev: queue/io_poll $poll; nvme poll_queues $(cat /sys/module/nvme/parameters/poll_queues 2>/dev/null || echo '?')"
# One bpftrace session for every run (measure_bios_during reuses a running
# one): a session per run attached eight times, 7-23 s each under TCG.
bio_trace_start "$dev" || { check "bpftrace attaches" 0 "no interval marker from bpftrace"; finish_all; }

declare -A ref
for e in A U Q P; do
	runs "$e" || continue
	[[ $e == P && $poll != 1 ]] && continue
	: >"$ESN_WORK/commands.log"
	run_engine EEVDF "$e"
	ref[$e]="EEVDF $RUN_PCT1 %"
done

if ! sched_start "$sched_out" "$sched_err" "$load_timeout" "$bin" "${sched_args[@]}"; then
	check "scx_esn loads" 0 "$SCHED_WHY"
	finish_all
fi
say "scx_esn loaded after ${SCHED_TOOK}s"

for e in A U Q P; do
	runs "$e" || continue
	name=$(engine_name "$e")
	if [[ $e == P && $poll != 1 ]]; then
		check "P $name: the disk has a polled queue" 0 \
			"queue/io_poll $poll: nvme.poll_queues was not applied (tests/vm/run.sh passes it)"
		continue
	fi
	: >"$ESN_WORK/commands.log"
	run_engine scx_esn "$e"
	ok=0
	pct_ge "$RUN_PCT1" 90 && ((RUN_RC == 0)) && ok=1
	check "$e $name: >= 90 % of the bios from node 1" "$ok" "scx_esn $RUN_FIG; ${ref[$e]:-no reference}"
	if [[ $e == Q ]]; then
		sqp=$(share_of_comm iou-sqp)
		check "Q the iou-sqp threads submit >= 90 % of the bios" "$(pct_ge "$sqp" 90 && echo 1 || echo 0)" \
			"$sqp %; top submitters: $(head -n 3 "$MB_TIDFILE" | awk '{ printf "%s %s %d; ", $1, $2, $3 + $4 }')"
		read -r watts busy <"$ESN_WORK/busy"
		ok=0
		pct_ge "${watts:--1}" 80 && pct_ge "${busy:-0}" 100 && ok=1
		check "Q polling counts as busy: the iou-sqp threads >= 100 % of a CPU, node 1 >= 80 W (model)" "$ok" \
			"iou-sqp threads ${busy:-?} % of a CPU; node 1 ${watts:-?} W"
	fi
	if [[ $e == P ]]; then
		read -r watts busy <"$ESN_WORK/busy"
		ok=0
		pct_ge "${watts:--1}" 80 && pct_ge "${busy:-0}" 100 && ok=1
		check "P polling counts as busy: fio's pollers >= 100 % of a CPU, node 1 >= 80 W (model)" "$ok" \
			"fio ${busy:-?} % of a CPU; node 1 ${watts:-?} W"
	fi
done

check_still_loaded
finish_all
