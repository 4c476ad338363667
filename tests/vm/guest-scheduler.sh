#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh): scx_esn loaded in a 2-node guest with the NVMe
# on node 1, judged by the bpftrace count of which node submitted the bios.
#   T. scx_esn topology --json: 2 nodes (CPUs 0-1, 2-3), distance 20, the
#      NVMe disk with home node 1 (the same facts as the guest's sysfs)
#   1. scx_esn loads: sched_ext state "enabled", root/ops "esn..." (<= 30 s),
#      and libbpf warned nothing on its stderr
#   V. the verifier's processed instructions per program (the kernel's
#      verified_insns), reported, each below half the limit
#   2. fio 2 jobs unpinned: >= 95 % of the bios from node 1
#  2e. fio 1 job, and beside it a task that is not I/O-bound and wakes
#      every 10 ms, started on node 0 and then allowed everywhere: while the
#      job is placed on node 1, which has a CPU beside it, scx_esn runs the
#      sleeper there and node 0 is left asleep (keep_idle_nodes): >= 60 % of
#      the samples of the CPU it last ran on (the kernel's /proc/PID/stat,
#      every 0.2 s) are node 1's, where the kernel's idle pick keeps it on
#      its previous CPU on node 0
#  2b. fio 2 jobs started on CPUs 0-1, then allowed everywhere: share of node 1
#      >= 90 % of the bios from node 1 (ESN_ASSERT_MIGRATE=0: report only)
#   3. fio 4 jobs unpinned: 1..3 jobs (expect 2) mostly (> 80 %) from node 1,
#      at least one mostly from node 0
#   4. stress-ng --cpu 4 beside a 2-job fio: scx_esn survives, state enabled,
#      no stall/error in its stderr nor sched_ext errors in dmesg
#   5. fio pinned to CPUs 0-1: >= 95 % of the bios from node 0
#  5b. fio 2 jobs placed on node 1, then their affinity narrowed to CPUs 0-1
#      (node 0): >= 90 % of the bios after the change from node 0, fio exit 0,
#      scx_esn still enabled (a placement must not outlive the affinity that
#      allowed it, however recently it was checked)
#   6. SIGINT: scx_esn exits 0 within 15 s, state back to "disabled"
#  6b. `scx_esn --stats 1 | head -3`: the closed pipe stops it like SIGINT
#      (exit 0, state disabled, no panic)
#   7. a scheduler error (sysrq-S disables sched_ext): scx_esn exits non-zero
#      with the kernel's exit reason on stderr
# Step 0 (ESN_SCHED_REFERENCE=1) measures fio beside stress-ng under the
# default scheduler first, free and pinned to node 1 (where scx_esn places it),
# so step 4 reports scx_esn's IOPS under CPU load as ratios to both (same boot).
# Only reported: keeping I/O on its node costs CPU contention by design, and
# this VM has no real NUMA penalty to win back (that trade-off is the
# threshold's job, and the bench's). Off by default: it asserts nothing and
# took 81 s of the test's 260, which `make test` runs on two kernels.
#
# Environment:
#   ESN_DRY=1             no scheduler: steps 2-5 under EEVDF, figures reported
#                         but not asserted (tests this script and the measurement)
#   ESN_BIN               the binary (default $ESN_REPO/target/release/scx_esn)
#   ESN_SCHED_ARGS        its arguments (default "--threshold 2 --stats 1")
#   ESN_LOAD_TIMEOUT      seconds to wait for "enabled" (default 30)
#   ESN_FIO_RUNTIME       seconds per fio run (default 15)
#   ESN_SKIP_MIGRATE=1    leave out step 2b; ESN_ASSERT_MIGRATE=0 only reports it
#   ESN_SETTLE_INTERVALS  first seconds of each fio run left out of the shares,
#                         while the scheduler classifies the new tasks (default 2)
#   ESN_SCHED_REFERENCE=1 run step 0, the EEVDF reference for step 4's ratios
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

dry=${ESN_DRY:-0}
bin=${ESN_BIN:-$ESN_REPO/target/release/scx_esn}
read -r -a sched_args <<<"${ESN_SCHED_ARGS:---threshold 2 --stats 1}"
load_timeout=${ESN_LOAD_TIMEOUT:-30}
runtime=${ESN_FIO_RUNTIME:-15}
limit=$((runtime + 60))
export MB_SKIP=${ESN_SETTLE_INTERVALS:-2}
sched_out=$ESN_WORK/scx_esn.stdout
sched_err=$ESN_WORK/scx_esn.stderr

# expect NAME OK FIGURE: an assertion, or only a report under ESN_DRY=1.
expect() {
	if [[ $dry == 1 ]]; then check "$1 [dry]" info "$3"; else check "$1" "$2" "$3"; fi
}
b() { "$@" && echo 1 || echo 0; } # b TEST...: 1 if it holds, else 0

dmesg_sx_errors() { # sched_ext lines that tell of an error, since boot
	dmesg | grep -iE 'sched_ext|scx' | grep -iE 'error|stall|fail|disabled \((runnable|watchdog|.*error)|BUG|WARN' || true
}

cleanup() {
	sched_kill
	bio_trace_stop
	dmesg | tail -n 200 >"$ESN_WORK/dmesg-tail.txt"
	if [[ -s $sched_err || -s $sched_out ]]; then
		echo "----- scx_esn stderr (last 40 lines; full: scx_esn.stderr) -----"
		tail -n 40 "$sched_err"
		echo "----- scx_esn stdout (last 15 lines; full: scx_esn.stdout) -----"
		tail -n 15 "$sched_out"
		echo "-----"
	fi
	echo "sched_ext lines in dmesg:"
	dmesg | grep -iE 'sched_ext' | sed 's/^/    /'
}

finish_all() { cleanup; finish; }

say "scheduler test on $(uname -r); dry=$dry; bin=$bin ${sched_args[*]}"

require_nvme_and_sched_ext

# fio_beside_stress: 2 fio jobs beside stress-ng --cpu 4 (30 s); FIO must be set.
fio_beside_stress() {
	timeout -k 5 60 stress-ng --cpu 4 --timeout 30s --temp-path /tmp --metrics-brief >>"$ESN_WORK/stress-ng.log" 2>&1 &
	local stress=$!
	sleep 2
	"$@"
	local rc=$?
	wait "$stress" || rc=$?
	return "$rc"
}

# ---- T. topology discovery on a real NUMA + NVMe machine ------------------------
if [[ -x $bin ]]; then
	topo_fig=$("$bin" topology --json 2>&1 | python3 -c '
import json, sys
t = json.load(sys.stdin)
nodes = {n["id"]: n for n in t["nodes"]}
nvme = [d for d in t["devices"] if d["kind"] == "nvme"]
ok = (sorted(nodes) == [0, 1] and nodes[0]["cpus"] == [0, 1] and nodes[1]["cpus"] == [2, 3]
      and dict(map(tuple, nodes[0]["distances"])).get(1) == 20
      and len(nvme) == 1 and nvme[0]["home_node"] == 1 and nvme[0]["name"] == sys.argv[1])
print(int(ok), "nodes", {i: n["cpus"] for i, n in nodes.items()}, "nvme",
      [(d["name"], d["home_node"]) for d in nvme])
' "$(basename "$dev")" 2>&1)
	ok=${topo_fig%% *}
	[[ $ok == 1 ]] || ok=0 # a traceback is a failure too
	check "T scx_esn topology matches the VM" "$ok" "${topo_fig#* }"
fi

# ---- 0. reference: fio beside a CPU hog under the default scheduler --------------
ref_iops= ref_pin_iops=
if [[ ${ESN_SCHED_REFERENCE:-0} == 1 ]]; then
	fio_randread_args "$dev" 2 "$runtime"
	fio_beside_stress timeout -k 5 "$limit" "${FIO[@]}" >>"$ESN_WORK/commands.log" 2>&1
	ref_rc=$?
	ref_iops=$(fio_iops)
	fio_beside_stress timeout -k 5 "$limit" taskset -c 2-3 "${FIO[@]}" >>"$ESN_WORK/commands.log" 2>&1
	ref_pin_rc=$?
	ref_pin_iops=$(fio_iops)
	check "0 EEVDF: fio 2 jobs beside stress-ng" info \
		"IOPS=$ref_iops free (exit $ref_rc), IOPS=$ref_pin_iops pinned to node 1 (exit $ref_pin_rc)"
fi

# ---- 1. load -------------------------------------------------------------------
if [[ $dry != 1 ]]; then
	if [[ ! -x $bin ]]; then
		check "1 scx_esn loads" 0 "scx_esn binary not found at $bin; run make first"
		finish_all
	fi
	if sched_start "$sched_out" "$sched_err" "$load_timeout" "$bin" "${sched_args[@]}"; then
		# libbpf warns at load only when something is off (issue 19 found
		# "BPF map skeleton link is uninitialized" at every start).
		libbpf_warns=$(grep -c 'libbpf:' "$sched_err")
		ok=0; ((libbpf_warns == 0)) && ok=1
		check "1 scx_esn loads, no libbpf warning" "$ok" \
			"state=enabled ops=$(sx_ops) after ${SCHED_TOOK}s; libbpf lines in stderr: $libbpf_warns$(grep -m1 'libbpf:' "$sched_err" | sed 's/^/: /')"
		verifier_report "$sched_pid" scheduler
		# Its first line names the version, the commit and how it was started.
		started=$(grep -m1 ' started as: ' "$sched_err")
		ok=0
		[[ $started =~ scx_esn\ [0-9]+\.[0-9]+\.[0-9]+-g[0-9a-f]{12}\ [^\ ]+\ started\ as:\ .*scx_esn\ .*${sched_args[0]} ]] && ok=1
		check "1b start-up line: version, commit, command line" "$ok" "${started:-none in stderr}"
	else
		check "1 scx_esn loads" 0 "$SCHED_WHY"
		finish_all
	fi
else
	check "1 scx_esn loads [dry]" info "skipped (ESN_DRY=1): default scheduler, state=$(sx_state)"
fi

if ! bio_trace_start "$dev"; then
	check "bpftrace attaches" 0 "no marker within ${ESN_BT_ATTACH_TIMEOUT}s"
	finish_all
fi
# How long bpftrace took to attach, under the scheduler.
[[ $dry == 1 ]] || { sched_alive || check "scx_esn alive after bpftrace attach" 0 "it exited"; }

# ---- 2. two jobs: both next to the device ---------------------------------------
fio_randread_args "$dev" 2 "$runtime"
measure_bios_during "$limit" -- "${FIO[@]}"
ok=0
[[ $MB_RC == 0 && $MB_TOTAL -gt 100 ]] && pct_ge "$MB_PCT1" 95 && ok=1
expect "2 fio 2 jobs: >= 95 % bios from node 1" "$ok" \
	"$MB_PCT1 % of $MB_TOTAL bios (incl. first ${MB_SKIP}s: $MB_FULL_PCT1 %), IOPS=$(fio_iops), fio exit $MB_RC"

# ---- 2e. one job: the idle node is left asleep --------------------------------------
# The sleeper is perl: it starts in a fraction of the time python takes
# over 9p. The sampler starts no process (esn_nap, builtins).
kept_before=$(stats_sum kept_asleep "$sched_out")
taskset -c 0 perl -e 'select(undef, undef, undef, 0.01) while 1' &
sleeper=$!
esn_nap 1
taskset -p -c 0-3 "$sleeper" >/dev/null
(
	while kill -0 "$sleeper" 2>/dev/null; do
		read -r -a f <"/proc/$sleeper/stat" && echo "${f[38]}"
		esn_nap 0.2
	done
) >"$ESN_WORK/sleeper-cpus.txt" 2>/dev/null &
sampler=$!
# The sampling ends with fio: afterwards nothing is placed, and the sleeper
# goes where the kernel's idle pick sends it.
fio_then_stop_sleeper() {
	"$@"
	local rc=$?
	kill "$sleeper" 2>/dev/null
	return "$rc"
}
fio_randread_args "$dev" 1 "$runtime"
measure_bios_during "$limit" -- fio_then_stop_sleeper "${FIO[@]}"
kill "$sleeper" 2>/dev/null
wait "$sleeper" "$sampler" 2>/dev/null
# The first 10 samples (2 s) fall before the job is placed.
read -r on_n1 samples < <(awk 'NR > 10 { n++; if ($1 == 2 || $1 == 3) k++ } END { print k + 0, n + 0 }' "$ESN_WORK/sleeper-cpus.txt")
ok=0
((samples >= 20 && on_n1 * 100 >= samples * 60)) && [[ $MB_RC == 0 ]] && ok=1
expect "2e fio 1 job: a sleeper leaves idle node 0 asleep, >= 60 % of its samples on node 1" "$ok" \
	"$on_n1 of $samples samples on node 1's CPUs; fio's bios $MB_PCT1 % from node 1, exit $MB_RC; kept_asleep $(($(stats_sum kept_asleep "$sched_out") - kept_before))"

# ---- 2b. started on the wrong node: does the scheduler move them? -------------------
# Unpinned placement on an idle guest is partly luck (EEVDF gave 18-100 % from
# node 1 for two jobs); tasks that start on node 0 stay there under EEVDF
# (about 10 % from node 1), so this is the discriminating figure: >= 90 % from
# node 1 is required (ESN_ASSERT_MIGRATE=0 only reports it).
if [[ ${ESN_SKIP_MIGRATE:-0} != 1 ]]; then
	fio_randread_args "$dev" 2 "$((runtime + 5))"
	MB_SKIP=$((MB_SKIP + 5)) measure_bios_during "$limit" -- run_pinned_then_free 0-1 3 0-3 "${FIO[@]}"
	tid_split fio 80
	fig="$MB_PCT1 % of $MB_TOTAL bios after the first $MB_SKIPPED s; jobs mostly node1 $MB_JOBS_N1/$MB_JOBS; fio exit $MB_RC"
	if [[ ${ESN_ASSERT_MIGRATE:-1} == 1 ]]; then
		ok=0
		[[ $MB_RC == 0 && $MB_TOTAL -gt 100 ]] && pct_ge "$MB_PCT1" 90 && ok=1
		expect "2b fio started on node 0, freed: >= 90 % node 1" "$ok" "$fig"
	else
		check "2b fio started on node 0, freed: node 1 share" info "$fig"
	fi
fi

# ---- 3. four jobs: the threshold (2) keeps about two on node 1 ---------------------
fio_randread_args "$dev" 4 "$runtime"
measure_bios_during "$limit" -- "${FIO[@]}"
tid_split fio 80
ok=0
[[ $MB_RC == 0 && $MB_JOBS == 4 ]] && ((MB_JOBS_N1 >= 1 && MB_JOBS_N1 <= 3 && MB_JOBS_N0 >= 1)) && ok=1
expect "3 fio 4 jobs: 1..3 jobs on node 1 (expect 2)" "$ok" \
	"$MB_JOBS_N1 of $MB_JOBS jobs >80 % node 1, $MB_JOBS_N0 >80 % node 0; node1 share $MB_PCT1 % of $MB_TOTAL bios; IOPS=$(fio_iops)"

# ---- 4. CPU-bound load beside the I/O -----------------------------------------------
say "stress-ng --cpu 4 --timeout 30s beside fio"
timeout -k 5 60 stress-ng --cpu 4 --timeout 30s --temp-path /tmp --metrics-brief >>"$ESN_WORK/stress-ng.log" 2>&1 &
stress_pid=$!
sleep 2
fio_randread_args "$dev" 2 "$runtime"
measure_bios_during "$limit" -- "${FIO[@]}"
fio_rc=$MB_RC
wait "$stress_pid"
stress_rc=$?
load_iops=$(fio_iops)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
vs_eevdf="no EEVDF reference (ESN_SCHED_REFERENCE=1 runs one)"
[[ $ref_iops ]] &&
	vs_eevdf="$(ratio "$load_iops" "$ref_pin_iops")x EEVDF pinned to node 1, $(ratio "$load_iops" "$ref_iops")x EEVDF free"
check "4 fio 2 jobs beside stress-ng: node 1 share" info \
	"$MB_PCT1 % of $MB_TOTAL bios, IOPS=$load_iops ($vs_eevdf); fio exit $fio_rc, stress-ng exit $stress_rc"
errs=$(grep -ciE 'stall|error' "$sched_err" 2>/dev/null || true)
sx_errs=$(dmesg_sx_errors)
if [[ $dry != 1 ]]; then
	ok=$(b test "$(sx_state)" == enabled)
	sched_alive || ok=0
	[[ ${errs:-0} == 0 && -z $sx_errs && $fio_rc == 0 && $stress_rc == 0 ]] || ok=0
	check "4 scx_esn survives CPU load" "$ok" \
		"alive=$(sched_alive && echo yes || echo no) state=$(sx_state) stall/error lines in stderr=${errs:-0} dmesg sched_ext errors=$(grep -c . <<<"$sx_errs")"
	if [[ -n $sx_errs ]]; then
		while IFS= read -r l; do echo "    dmesg: $l"; done <<<"$sx_errs"
	fi
else
	check "4 no sched_ext errors in dmesg [dry]" info "$(grep -c . <<<"$sx_errs") lines"
fi

# ---- 5. affinity is respected ---------------------------------------------------------
fio_randread_args "$dev" 2 "$runtime"
measure_bios_during "$limit" -- taskset -c 0-1 "${FIO[@]}"
ok=0
[[ $MB_RC == 0 && $MB_TOTAL -gt 100 ]] && pct_ge "$MB_PCT0" 95 && ok=1
# This one holds under any scheduler: assert it in dry runs too.
check "5 fio pinned 0-1: >= 95 % bios from node 0" "$ok" \
	"$MB_PCT0 % of $MB_TOTAL bios, IOPS=$(fio_iops), fio exit $MB_RC"

# ---- 5b. placed, then narrowed to the other node ---------------------------------------
fio_randread_args "$dev" 2 "$((runtime + 5))"
MB_SKIP=$((MB_SKIP + 5)) measure_bios_during "$limit" -- run_pinned_then_free 0-3 5 0-1 "${FIO[@]}"
ok=0
[[ $MB_RC == 0 && $MB_TOTAL -gt 100 ]] && pct_ge "$MB_PCT0" 90 && ok=1
[[ $dry == 1 ]] || { [[ $(sx_state) == enabled ]] && sched_alive; } || ok=0
check "5b placed fio narrowed to 0-1: >= 90 % bios node 0" "$ok" \
	"$MB_PCT0 % of $MB_TOTAL bios after the first $MB_SKIPPED s (whole run: node 1 $MB_FULL_PCT1 %), IOPS=$(fio_iops), fio exit $MB_RC, state $(sx_state)"

bio_trace_stop

# ---- 6. clean unload on SIGINT ----------------------------------------------------------
if [[ $dry != 1 ]]; then
	if sched_alive; then
		kill -INT "$sched_pid"
		if ! sched_wait_exit 15; then
			check "6 SIGINT: exit 0 within 15 s, state disabled" 0 "still running after 15 s (state=$(sx_state))"
		else
			for _ in $(seq 1 10); do [[ $(sx_state) == disabled ]] && break; sleep 0.5; done
			st=$(sx_state)
			check "6 SIGINT: exit 0 within 15 s, state disabled" "$(b test "$SCHED_RC" == 0 -a "$st" == disabled)" \
				"exit $SCHED_RC after ${SCHED_WAITED}s, state=$st"
		fi
	else
		rc=
		wait "$sched_pid"
		rc=$?
		sched_pid=
		check "6 SIGINT: exit 0 within 15 s, state disabled" 0 "scx_esn had already exited ($rc) before SIGINT"
	fi
else
	check "6 SIGINT [dry]" info "skipped (ESN_DRY=1)"
fi

# ---- 6b. its reader stops early: `scx_esn --stats 1 | head -3` ----------------------
# The closed pipe must stop scx_esn as SIGINT does (exit 0, unloaded), not
# panic on the write.
if [[ $dry != 1 ]]; then
	t0=$SECONDS
	timeout -k 5 90 "$bin" --threshold 2 --stats 1 2>"$sched_err.6b" </dev/null | head -n3 >"$sched_out.6b"
	rc=${PIPESTATUS[0]}
	for _ in $(seq 1 10); do [[ $(sx_state) == disabled ]] && break; sleep 0.5; done
	st=$(sx_state)
	panic=$(grep -m1 -i 'panicked' "$sched_err.6b" || true)
	check "6b stdout closed (| head -3): exit 0, state disabled, no panic" \
		"$(b test "$rc" == 0 -a "$st" == disabled -a -z "$panic")" \
		"exit $rc after $((SECONDS - t0))s, state=$st, $(wc -l <"$sched_out.6b") lines read${panic:+, $panic}"
fi

# ---- 7. a scheduler error exits non-zero with the kernel's reason -----------------
# sysrq-S makes the kernel disable the BPF scheduler with an error exit
# (SCX_EXIT_SYSRQ): what an operator sees after a stall or a BPF error.
if [[ $dry != 1 ]]; then
	"$bin" "${sched_args[@]}" >"$sched_out.7" 2>"$sched_err.7" </dev/null &
	sched_pid=$!
	t0=$SECONDS
	while ((SECONDS - t0 < load_timeout)) && [[ $(sx_state) != enabled ]] && sched_alive; do sleep 0.5; done
	echo 1 >/proc/sys/kernel/sysrq
	echo S >/proc/sysrq-trigger
	if ! sched_wait_exit 15; then
		check "7 error exit: non-zero, kernel reason" 0 "still running 15 s after sysrq-S (state=$(sx_state))"
	else
		reason=$(grep -m1 -i 'sysrq' "$sched_err.7" || true)
		ok=0
		[[ $SCHED_RC != 0 && -n $reason ]] && ok=1
		check "7 error exit: non-zero, kernel reason" "$ok" "exit $SCHED_RC; stderr: ${reason:-<no sysrq reason>}"
	fi
fi

finish_all
