# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals for the scripts that source it
#
# Helpers for guest scripts (sourced inside the VM; see run-in-vm.sh).
#
#   . "$ESN_REPO/tests/vm/guest-lib.sh"
#
#   nvme_dev_on_node NODE          -> /dev/nvmeXnY of a controller on NODE
#   dev_t_of /dev/X                -> kernel dev_t ((major << 20) | minor)
#   fio_randread_args DEV JOBS SEC -> sets array FIO (4k randread, direct, psync)
#   bio_trace_start DEV / bio_trace_stop
#                                  -> one bpftrace session for many measurements
#   measure_bios_during SECONDS -- COMMAND...
#                                  -> runs COMMAND (killed after SECONDS), counts
#                                     the bios of the traced device by submitting
#                                     node and thread; sets MB_* (see below)
#   check NAME OK FIGURE           -> records a row of the summary; OK is 1/0
#   summary_print                  -> prints the table, returns 1 if a row failed
#
#   observe_start DEV / observe_stop
#                                  -> scx_esn observe --json on DEV in the
#                                     background; observe_stop ends it (SIGINT)
#                                     and sets OBS_* from its total report
#   sched_start OUT ERR TIMEOUT BIN ARGS... / sched_wait_exit SECONDS / sched_kill
#                                  -> the scheduler in the background, up
#                                     when sched_ext says enabled (sched_pid)
#   esn_save                       -> copies the working files to $ESN_OUTDIR
#   lab_start ARGS / lab_stop      -> tests/lab/remote-penalty in the background
#   fio_clat_pair DEV LCPUS RCPUS ROUNDS SECS
#                                  -> fio's mean clat pinned local vs remote,
#                                     interleaved; sets PAIR_*
#
# Everything goes to stdout (the guest log). Files that are written while they
# are read (bpftrace output, command logs, the summary) live in $ESN_WORK, on
# the guest's own /tmp: reading a file on the 9p share while a guest process
# appends to it failed with ENODATA. esn_save (called by bio_trace_stop and
# finish) copies them to $ESN_OUTDIR on the host.

ESN_REPO=${ESN_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
ESN_OUTDIR=${ESN_OUTDIR:-/tmp/esn-out}
ESN_WORK=${ESN_WORK:-/tmp/esn-work}
mkdir -p "$ESN_OUTDIR" "$ESN_WORK"
ESN_BT_SCRIPT=${ESN_BT_SCRIPT:-$ESN_REPO/scripts/bio-node.bt}
# bpftrace loads its LLVM libraries over the guest's uncached 9p root: 30-44 s
# to attach here (2026-11-28), 77 s for one of guest-scripts.sh's variants,
# and a busy CI host is slower still. Waiting costs nothing when it attaches.
ESN_BT_ATTACH_TIMEOUT=${ESN_BT_ATTACH_TIMEOUT:-240}
ESN_SUMMARY=$ESN_WORK/summary.tsv

esn_save() { cp -f "$ESN_WORK"/* "$ESN_OUTDIR"/ 2>/dev/null || true; }

say() { printf '[%6.1f] %s\n' "$(cut -d' ' -f1 /proc/uptime)" "$*"; }

# ------------------------------------------------------------- devices ------
nvme_dev_on_node() { # NODE
	local want=$1 c node ns
	for c in /sys/class/nvme/nvme*; do
		[[ -e $c/device/numa_node ]] || continue
		node=$(cat "$c/device/numa_node")
		[[ $node == "$want" ]] || continue
		for ns in "$c"/nvme*n*; do
			[[ -e $ns/dev ]] || continue
			[[ $(basename "$ns") =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
			echo "/dev/$(basename "$ns")"
			return 0
		done
	done
	return 1
}

dev_t_of() { # /dev/BLOCKDEV
	local mm
	mm=$(stat -L -c '%t %T' "$1") || return 1
	# shellcheck disable=SC2086
	set -- $mm
	echo $(((0x$1 << 20) | 0x$2))
}

# The guest reads its root, the host's, through 9p at 4-6 MB/s and keeps no
# page of it cached once unmapped: every start of a program loads its
# libraries again (bpftrace: 200-300 MB of LLVM and clang, 16 s for
# --version against 2 s from tmpfs; fio: 64 libraries). Under load that
# stalls whatever starts. tmpfs_copy puts a program, the libraries its
# loader resolves, and that loader into a tmpfs, and prints a command that
# runs the copy.
ESN_COPIES=/run/esn-copies
tmpfs_copy() { # NAME BINARY [LIBDIR] -> prints the path of a wrapper running the copy
	local dir=$ESN_COPIES/$1 bin=$2 libdir=${3:-} loader=/lib64/ld-linux-x86-64.so.2 opts=() name
	name=$(basename "$bin")
	if [[ -n $libdir ]]; then
		loader=$libdir/ld-linux-x86-64.so.2
		opts=(--library-path "$libdir")
	fi
	if ! mountpoint -q "$ESN_COPIES"; then
		mkdir -p "$ESN_COPIES" && mount -t tmpfs -o size=900m esn-copies "$ESN_COPIES" || return 1
	fi
	mkdir -p "$dir/lib" &&
		"$loader" "${opts[@]}" --list "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
		xargs -r cp -L -t "$dir/lib" &&
		cp -L "$loader" "$dir/lib/ld-linux-x86-64.so.2" &&
		cp -L "$bin" "$dir/$name.bin" || return 1
	# Every library found among the copies, or the copy is not used.
	"$dir/lib/ld-linux-x86-64.so.2" --library-path "$dir/lib" --list "$dir/$name.bin" 2>&1 |
		grep -q 'not found' && return 1
	printf '#!/bin/sh\nexec %s/lib/ld-linux-x86-64.so.2 --library-path %s/lib %s/%s.bin "$@"\n' \
		"$dir" "$dir" "$dir" "$name" >"$dir/$name" &&
		chmod +x "$dir/$name" &&
		echo "$dir/$name"
}

# CPU hogs: busy loops in the background, their pids in spinners.
spinners=()

spin() { # NICE CPUS [chrt args...]: one more busy loop, pid in spinners
	local nice=$1 cpus=$2
	shift 2
	"$@" nice -n "$nice" taskset -c "$cpus" sh -c 'while :; do :; done' >/dev/null 2>&1 &
	spinners+=("$!")
}

spin_stop() {
	((${#spinners[@]})) || return 0
	kill "${spinners[@]}" 2>/dev/null
	wait "${spinners[@]}" 2>/dev/null
	spinners=()
}

fio_randread_args() { # DEV JOBS SECONDS [more fio args]
	local dev=$1 jobs=$2 secs=$3
	shift 3
	FIO=(/usr/bin/fio --name=esn-randread --filename="$dev" --readonly
		--rw=randread --bs=4k --direct=1 --ioengine=psync
		--numjobs="$jobs" --time_based --runtime="$secs"
		--group_reporting "$@")
}

# ------------------------------------------------------- the bpftrace side --
ESN_BT_PID=
ESN_BT_OUT=
ESN_BT_N=0

_bt_ticks() { grep -c '^ESN_TICK ' "$ESN_BT_OUT" 2>/dev/null || true; }

_bt_wait_ticks() { # N TIMEOUT: wait until at least N ticks, or time out
	local n=$1 deadline=$((SECONDS + $2))
	while (($(_bt_ticks) < n)); do
		if ! kill -0 "$ESN_BT_PID" 2>/dev/null; then return 2; fi
		((SECONDS >= deadline)) && return 1
		sleep 0.5
	done
}

bio_trace_start() { # DEV: start bpftrace on DEV; waits until it has attached
	local dev=$1 devt t0=$SECONDS
	devt=$(dev_t_of "$dev") || { say "bio_trace_start: cannot stat $dev"; return 1; }
	[[ -f $ESN_BT_SCRIPT ]] || { say "bio_trace_start: no $ESN_BT_SCRIPT"; return 1; }
	ESN_BT_N=$((ESN_BT_N + 1))
	ESN_BT_OUT=$ESN_WORK/bpftrace.$ESN_BT_N.out
	ESN_BT_DEV=$dev
	say "bpftrace: attaching to block_bio_queue for $dev (dev_t $devt) ..."
	bpftrace -B line "$ESN_BT_SCRIPT" "$devt" >"$ESN_BT_OUT" 2>&1 &
	ESN_BT_PID=$!
	if ! _bt_wait_ticks 1 "$ESN_BT_ATTACH_TIMEOUT"; then
		say "bpftrace: no interval marker after $((SECONDS - t0)) s; output:"
		sed 's/^/    /' "$ESN_BT_OUT"
		bio_trace_stop
		return 1
	fi
	say "bpftrace: attached after $((SECONDS - t0)) s"
}

# stop_with_sigint PID SECONDS: SIGINT, then wait up to SECONDS for PID to
# exit; SIGKILL after that. Returns 1 if it had to be killed.
stop_with_sigint() {
	local pid=$1 deadline=$((SECONDS + $2))
	kill -INT "$pid" 2>/dev/null
	while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.5; done
	kill -0 "$pid" 2>/dev/null || return 0
	kill -KILL "$pid" 2>/dev/null
	return 1
}

bio_trace_stop() {
	[[ -n $ESN_BT_PID ]] || return 0
	stop_with_sigint "$ESN_BT_PID" 60 || say "bpftrace: did not exit within 60 s of SIGINT; killed it"
	wait "$ESN_BT_PID" 2>/dev/null
	ESN_BT_PID=
	esn_save
}

# The bios between tick FROM and tick TO (TO=0: the last counts in the file),
# from the cumulative snapshots printed before each tick: prints MB_* shell
# assignments and writes the per-thread table to TIDFILE.
_bt_sum() { # FROM TO TIDFILE
	awk -v from="$1" -v to="$2" -v tidfile="$3" '
	function snap(dst,   k) {   # copy the current block into snapshot dst
		for (k in curn) sn[dst, "n", k] = curn[k]
		for (k in curi) si[dst, k] = curi[k]
		for (k in curc) sc[dst, k] = curc[k]
		have[dst] = 1
	}
	function reset() { split("", curn); split("", curi); split("", curc); blk = 0 }
	BEGIN { reset() }
	/^ESN_TICK / {
		k = $2 + 0
		if (k == from) snap("A")
		if (k == to) { snap("B"); done = 1 }
		# Remember the last complete snapshot for TO=0.
		split("", ln); split("", li); split("", lc)
		for (x in curn) ln[x] = curn[x]
		for (x in curi) li[x] = curi[x]
		for (x in curc) lc[x] = curc[x]
		reset(); next
	}
	done { next }
	/^@node\[/ {
		match($0, /\[[0-9]+\]/); n = substr($0, RSTART + 1, RLENGTH - 2)
		curn[n] = $NF + 0; blk = 1; next
	}
	/^@io\[/ {
		line = $0
		sub(/^@io\[/, "", line); v = line; sub(/.*\]: */, "", v); sub(/\]: *[0-9]+$/, "", line)
		# line = "TID, COMM, NODE"
		t = line; sub(/,.*/, "", t)
		nd = line; sub(/.*, /, "", nd)
		c = line; sub(/^[0-9]+, /, "", c); sub(/, [0-9]+$/, "", c); gsub(/[ \t]/, "_", c)
		curi[t, nd] += v; curc[t, c] += v; blk = 1; next
	}
	END {
		if (!done) {
			if (blk) snap("B")      # the final counts printed at exit
			else {                  # still running: the last snapshot
				for (x in ln) sn["B", "n", x] = ln[x]
				for (x in li) si["B", x] = li[x]
				for (x in lc) sc["B", x] = lc[x]
			}
		}
		total = 0; split("", node)
		for (key in sn) {
			split(key, p, SUBSEP); if (p[1] != "B") continue
			d = sn[key] - sn["A", "n", p[3]]; node[p[3]] += d; total += d
		}
		n0 = node[0] + 0; n1 = node[1] + 0; other = total - n0 - n1
		printf "MB_TOTAL=%d\nMB_N0=%d\nMB_N1=%d\nMB_NOTHER=%d\n", total, n0, n1, other
		printf "MB_PCT0=%.1f\nMB_PCT1=%.1f\n", total ? 100 * n0 / total : 0, total ? 100 * n1 / total : 0
		split("", io); split("", tids); split("", best); split("", comm)
		for (key in si) {
			split(key, p, SUBSEP); if (p[1] != "B") continue
			d = si[key] - si["A", p[2], p[3]]
			if (d > 0) { io[p[2], p[3]] += d; tids[p[2]] = 1 }
		}
		for (key in sc) {
			split(key, p, SUBSEP); if (p[1] != "B") continue
			d = sc[key] - sc["A", p[2], p[3]]
			if (d > best[p[2]]) { best[p[2]] = d; comm[p[2]] = p[3] }
		}
		for (t in tids) {
			a = io[t, 0] + 0; b = io[t, 1] + 0; s = a + b
			printf "%s %s %d %d %.1f\n", t, comm[t], a, b, s ? 100 * b / s : 0 > tidfile
		}
	}' "$ESN_BT_OUT"
}

# measure_bios_during SECONDS -- COMMAND...
# Runs COMMAND (a program or shell function) with stdout/stderr appended to
# $ESN_WORK/commands.log, killing it after SECONDS. Uses the running
# bio_trace_start session, or starts one on $ESN_MEASURE_DEV (default: the
# NVMe on node 1) and stops it afterwards. Intervals before the command started
# (the bpftrace warm-up) are dropped, and so are the command's own first
# MB_SKIP (default 0) one-second intervals if MB_SKIP is set. A command that
# changes the run's conditions midway (run_pinned_then_free) marks the moment
# in $ESN_WORK/mb.mark; then the skip also covers everything up to one
# whole interval after the mark: how long
# the change itself took (a process start under TCG: seconds) must not count
# against the scheduler. Sets:
#   MB_TOTAL MB_N0 MB_N1 MB_NOTHER MB_PCT0 MB_PCT1  bios and shares by node
#   MB_FULL_TOTAL MB_FULL_PCT0 MB_FULL_PCT1      the same without MB_SKIP
#   MB_SKIPPED  the intervals skipped (MB_SKIP, or more after a mark)
#   MB_RC       the command's exit status (124 if it was killed)
#   MB_TIDFILE  lines "TID COMM BIOS_NODE0 BIOS_NODE1 PCT_NODE1", most bios first
# and prints them. Returns 1 if the measurement itself failed.
measure_bios_during() {
	local limit=$1 own=0 from to cpid wpid vars
	shift
	[[ ${1:-} == -- ]] && shift
	(($# > 0)) || { say "measure_bios_during: no command"; return 1; }
	MB_TOTAL=0 MB_N0=0 MB_N1=0 MB_NOTHER=0 MB_PCT0=0 MB_PCT1=0 MB_RC=-1
	if [[ -z $ESN_BT_PID ]] || ! kill -0 "$ESN_BT_PID" 2>/dev/null; then
		local dev=${ESN_MEASURE_DEV:-}
		[[ -n $dev ]] || dev=$(nvme_dev_on_node 1) || { check "measurement" 0 "no NVMe device on node 1"; return 1; }
		bio_trace_start "$dev" || { check "measurement" 0 "bpftrace did not attach"; return 1; }
		own=1
	fi
	from=$(_bt_ticks)
	rm -f "$ESN_WORK/mb.mark"
	say "run (limit ${limit}s): $*"
	echo "=== $(date +%T) $*" >>"$ESN_WORK/commands.log"
	if declare -F "$1" >/dev/null; then
		# A shell function: run it in a subshell with a watchdog that ends the
		# subshell and its children.
		"$@" >>"$ESN_WORK/commands.log" 2>&1 &
		cpid=$!
		(
			sleep "$limit"
			pkill -TERM -P "$cpid"
			kill -TERM "$cpid" && sleep 5 && pkill -KILL -P "$cpid" && kill -KILL "$cpid"
		) >/dev/null 2>&1 &
		wpid=$!
		wait "$cpid"
		MB_RC=$?
		kill "$wpid" 2>/dev/null
		wait "$wpid" 2>/dev/null
		((MB_RC == 143 || MB_RC == 137)) && MB_RC=124
	else
		timeout -k 5 "$limit" "$@" >>"$ESN_WORK/commands.log" 2>&1
		MB_RC=$?
		((MB_RC == 137)) && MB_RC=124
	fi
	# Wait for two more ticks: the one after the command ended may already be
	# in flight (bpftrace prints with a delay), the next one is surely later.
	to=$(($(_bt_ticks) + 2))
	if ! _bt_wait_ticks "$to" 30; then
		say "measure: no interval marker within 30 s after the command; using what there is"
		to=0
	fi
	MB_TIDFILE=$ESN_WORK/tids.$ESN_BT_N.$from.txt
	# The whole command first, then (MB_SKIP > 0) without its first intervals.
	if ! vars=$(_bt_sum "$from" "$to" /dev/null) || [[ $vars != *MB_TOTAL=* ]]; then
		check "measurement of: $*" 0 "could not read the bpftrace output $ESN_BT_OUT"
		return 1
	fi
	eval "$vars"
	MB_FULL_TOTAL=$MB_TOTAL MB_FULL_PCT0=$MB_PCT0 MB_FULL_PCT1=$MB_PCT1
	local skip=${MB_SKIP:-0} mark= mark_skip
	# Tick mark was the last printed before the change: the interval ending at
	# tick mark+1 holds it, and a snapshot at tick k is the count at k-1; one
	# more interval to settle.
	[[ -s $ESN_WORK/mb.mark ]] && read -r mark <"$ESN_WORK/mb.mark"
	if [[ $mark =~ ^[0-9]+$ ]]; then
		mark_skip=$((mark + 3 - from))
		if ((mark_skip > skip)); then
			skip=$mark_skip
			say "      (the command marked its change at tick $mark, $((mark - from)) s in)"
		fi
	fi
	((to > 0 && from + skip >= to - 1)) && skip=0 # never skip everything
	MB_SKIPPED=$skip
	: >"$MB_TIDFILE.tmp"
	if ! vars=$(_bt_sum "$((from + skip))" "$to" "$MB_TIDFILE.tmp") || [[ $vars != *MB_TOTAL=* ]]; then
		check "measurement of: $*" 0 "could not read the bpftrace output $ESN_BT_OUT"
		return 1
	fi
	eval "$vars"
	awk '{ print $3 + $4, $0 }' "$MB_TIDFILE.tmp" | sort -s -k1,1nr | cut -d' ' -f2- >"$MB_TIDFILE"
	rm -f "$MB_TIDFILE.tmp"
	((own)) && bio_trace_stop
	say "bios: total $MB_TOTAL | node0 $MB_N0 ($MB_PCT0 %) | node1 $MB_N1 ($MB_PCT1 %)$( ((MB_NOTHER)) && echo " | other $MB_NOTHER") | command exit $MB_RC"
	((skip > 0)) && say "      (first $skip s of the command dropped; with them: node1 $MB_FULL_PCT1 % of $MB_FULL_TOTAL)"
	local t c a b p
	while read -r t c a b p; do
		printf '    tid %-7s %-16s node0 %7d  node1 %7d  (%5.1f %% node1)\n' "$t" "$c" "$a" "$b" "$p"
	done <"$MB_TIDFILE"
	return 0
}

# ------------------------------------------------------ the scheduler ------
sched_pid=

# require_nvme_and_sched_ext: sets dev to the NVMe disk on node 1; a guest
# without it or without sched_ext ends the test (the caller's finish_all).
require_nvme_and_sched_ext() {
	dev=$(nvme_dev_on_node 1) || dev=
	if [[ -z $dev || ! -b $dev ]]; then
		check "NVMe on node 1" 0 "none found: $(echo /sys/class/nvme/*)"
		finish_all
	fi
	[[ -d /sys/kernel/sched_ext ]] || { check "sched_ext in the kernel" 0 "/sys/kernel/sched_ext missing"; finish_all; }
}
# sched_script_vars: what a guest script that loads scx_esn reads from its
# environment: bin (ESN_BIN), sched_args (ESN_SCHED_ARGS, default
# "--threshold 2 --stats 1"), load_timeout (ESN_LOAD_TIMEOUT, 30), runtime
# (ESN_FIO_RUNTIME, 15), and where scx_esn's output goes: sched_out, sched_err.
sched_script_vars() {
	bin=${ESN_BIN:-$ESN_REPO/target/release/scx_esn}
	read -r -a sched_args <<<"${ESN_SCHED_ARGS:---threshold 2 --stats 1}"
	load_timeout=${ESN_LOAD_TIMEOUT:-30}
	runtime=${ESN_FIO_RUNTIME:-15}
	sched_out=$ESN_WORK/scx_esn.stdout
	sched_err=$ESN_WORK/scx_esn.stderr
}

# sched_cleanup LINES [DMESG_PATTERN]: stop scx_esn and bpftrace, then show
# the last LINES of scx_esn's stderr and the dmesg lines matching the
# pattern (default: sched_ext's).
sched_cleanup() {
	sched_kill
	bio_trace_stop
	if [[ -s $sched_err ]]; then
		echo "----- scx_esn stderr (last $1 lines) -----"
		tail -n "$1" "$sched_err"
	fi
	echo "sched_ext lines in dmesg:"
	dmesg | grep -iE "${2:-sched_ext}" | tail -n 40 | sed 's/^/    /'
}

# check_still_loaded: check L, scx_esn still enabled and alive, and no
# sched_ext error or stall in dmesg.
check_still_loaded() {
	local ok=0 errs
	errs=$(dmesg | grep -iE 'sched_ext' | grep -iE 'error|stall|fail|disabled \(' || true)
	[[ $(sx_state) == enabled && -z $errs ]] && sched_alive && ok=1
	check "L scx_esn still loaded, no sched_ext error" "$ok" "state=$(sx_state); ${errs:-no errors in dmesg}"
}

sx_state() { cat /sys/kernel/sched_ext/state 2>/dev/null || echo missing; }
sx_ops() { cat /sys/kernel/sched_ext/root/ops 2>/dev/null || true; }
sched_alive() { [[ -n $sched_pid ]] && kill -0 "$sched_pid" 2>/dev/null; }

# sched_start OUT ERR TIMEOUT BIN ARGS...: start the scheduler in the
# background (stdout to OUT, stderr to ERR) and wait until sched_ext says it is
# enabled with ops "esn...". Sets sched_pid and SCHED_TOOK (seconds); on
# failure returns 1 with SCHED_WHY saying what happened.
sched_start() {
	local out=$1 err=$2 timeout=$3 t0=$SECONDS st
	shift 3
	SCHED_WHY=''
	SCHED_TOOK=0
	st=$(sx_state)
	[[ $st == disabled ]] || say "WARNING: sched_ext state is '$st' before loading"
	# A background job of a non-interactive shell ignores SIGINT; scx_esn
	# installs its own handler, so SIGINT still reaches it.
	"$@" >"$out" 2>"$err" </dev/null &
	sched_pid=$!
	while ((SECONDS - t0 < timeout)); do
		if [[ $(sx_state) == enabled && $(sx_ops) == esn* ]]; then
			SCHED_TOOK=$((SECONDS - t0))
			return 0
		fi
		sched_alive || break
		sleep 0.5
	done
	SCHED_TOOK=$((SECONDS - t0))
	local proc="still running"
	if ! sched_alive; then
		wait "$sched_pid"
		proc="exited with status $?"
		sched_pid=
	fi
	SCHED_WHY="state=$(sx_state) ops='$(sx_ops)' after ${SCHED_TOOK}s (limit ${timeout}s); scx_esn $proc"
	return 1
}

# sched_wait_exit SECONDS: wait (bounded) for scx_esn to exit. Returns 1 if it
# still runs; else sets SCHED_RC (its status) and SCHED_WAITED (seconds).
sched_wait_exit() {
	local t0=$SECONDS
	while sched_alive && ((SECONDS - t0 < $1)); do sleep 0.5; done
	sched_alive && return 1
	wait "$sched_pid"
	SCHED_RC=$?
	SCHED_WAITED=$((SECONDS - t0))
	sched_pid=
}

# sched_kill: the end of a test: a scheduler still running is killed.
sched_kill() {
	sched_alive || return 0
	say "cleanup: scx_esn (pid $sched_pid) still running; SIGKILL"
	kill -KILL "$sched_pid" 2>/dev/null
	wait "$sched_pid" 2>/dev/null
	sched_pid=
}

# verifier_report PID LABEL: the BPF programs process PID holds (the
# prog_id of its file descriptors), with the instructions the verifier
# processed for each (the kernel's verified_insns, by bpftool), written to $ESN_WORK/verifier-LABEL.tsv and checked against
# half the verifier's limit of 1,000,000: a change that nears it shows here.
VERIFIER_LIMIT=1000000
verifier_report() {
	local pid=$1 label=$2 out=$ESN_WORK/verifier-$2.tsv fig
	if ! command -v bpftool >/dev/null; then
		check "V verifier instructions ($label)" 0 "bpftool is missing (tests/vm/setup.sh installs it)"
		return
	fi
	# The programs the process holds: the prog_id of its BPF file
	# descriptors (bpftool's own pid column needs a BPF iterator that not
	# every kernel config has).
	# fdinfo also gives verified_insns (5.16+), which Debian 12's bpftool
	# does not print: "id:insns" pairs.
	local ids
	ids=$(awk '/^prog_id:/ { id = $2 } /^verified_insns:/ { print id ":" $2 }' \
		/proc/"$pid"/fdinfo/* 2>/dev/null | sort -u | paste -sd,)
	bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
ids = dict(map(int, pair.split(":")) for pair in sys.argv[5].split(",") if ":" in pair)
pid, out, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
progs = [p for p in json.load(sys.stdin) if p.get("id") in ids]
rows = sorted(((p.get("name", "?"), p.get("type", "?"), ids[p["id"]]) for p in progs),
              key=lambda r: -(r[2] or 0))
with open(out, "w") as f:
    for name, kind, insns in rows:
        f.write(f"{name}\t{kind}\t{insns}\n")
known = [r[2] for r in rows if r[2] is not None]
ok = bool(rows) and len(known) == len(rows) and max(known) < limit // 2
top = ", ".join(f"{n} {i}" for n, _, i in rows[:4])
print(int(ok), f"{len(rows)} programs, total {sum(known)}, most {max(known, default=0)} "
      f"(limit {limit}); {top}; all in verifier-{sys.argv[4]}.tsv")
' "$pid" "$out" "$VERIFIER_LIMIT" "$label" "$ids" >"$ESN_WORK/verifier.fig" 2>&1 || true
	fig=$(cat "$ESN_WORK/verifier.fig")
	[[ ${fig%% *} == 1 ]] || fig="0 ${fig#[01] }"
	check "V verifier instructions ($label, $(uname -r))" "${fig%% *}" "${fig#* }"
	sed 's/^/    /' "$out" 2>/dev/null
}

# --------------------------------------------------------- scx_esn observe --
OBS_N=0
OBS_PID=
# observe_start DEV: starts `scx_esn observe --json` on DEV and waits until it
# has attached (BPF loading is slow under TCG). Returns 1 if it did not.
observe_start() {
	local dev=$1 bin=${ESN_BIN:-$ESN_REPO/target/release/scx_esn} waited=0
	OBS_N=$((OBS_N + 1))
	OBS_OUT=$ESN_WORK/observe.$OBS_N.jsonl
	OBS_ERR=$ESN_WORK/observe.$OBS_N.err
	"$bin" observe --json --interval 5 --device "$(basename "$dev")" >"$OBS_OUT" 2>"$OBS_ERR" &
	OBS_PID=$!
	until grep -q "observing block I/O" "$OBS_ERR" 2>/dev/null; do
		if ! kill -0 "$OBS_PID" 2>/dev/null || ((waited >= 240)); then
			say "scx_esn observe did not start:"
			sed 's/^/    /' "$OBS_ERR"
			kill "$OBS_PID" 2>/dev/null
			OBS_PID=
			return 1
		fi
		sleep 0.5
		waited=$((waited + 1))
	done
	say "scx_esn observe attached (pid $OBS_PID) on $dev"
}

# observe_stop: SIGINT to the observer, then its total report as
#   OBS_RC OBS_REQS OBS_LOCAL OBS_REMOTE OBS_REMOTE_PCT (of local+remote)
#   OBS_LAT ("local p50/p99 us | remote p50/p99 us", device read latency)
#   OBS_NODES (per node: requests submitted and remote %)
observe_stop() {
	OBS_RC=-1 OBS_REQS=0 OBS_LOCAL=0 OBS_REMOTE=0 OBS_REMOTE_PCT=-1 OBS_LAT=- OBS_NODES=-
	[[ -n $OBS_PID ]] || return 1
	kill -INT "$OBS_PID"
	wait "$OBS_PID"
	OBS_RC=$?
	OBS_PID=
	local vars
	vars=$(python3 - "$OBS_OUT" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
total = [l for l in lines if l["kind"] == "total"]
if not total or not total[0]["devices"]:
    sys.exit(1)
t = total[0]
d = t["devices"][0]
def lat(loc):
    e = [x for x in d["latency"] if x["locality"] == loc and x["op"] == "read" and x["kind"] == "device"]
    if not e or e[0]["p50_us"] is None:
        return "-"
    return f"{e[0]['p50_us']:.0f}/{e[0]['p99_us']:.0f}"
lr = d["local_reqs"] + d["remote_reqs"]
pct = 100.0 * d["remote_reqs"] / lr if lr else -1
nodes = " ".join(f"n{n['node']}:{n['reqs']}({100.0 * n['remote_reqs'] / n['reqs'] if n['reqs'] else 0:.0f}%remote)"
                 for n in t["nodes"])
print(f"OBS_REQS={d['reqs']} OBS_LOCAL={d['local_reqs']} OBS_REMOTE={d['remote_reqs']} "
      f"OBS_REMOTE_PCT={pct:.1f} OBS_LAT='local {lat('local')} | remote {lat('remote')} us' "
      f"OBS_NODES='{nodes}'")
PY
) || { say "observe: no total report in $OBS_OUT"; return 1; }
	eval "$vars"
	say "observe: $OBS_REQS requests, local $OBS_LOCAL, remote $OBS_REMOTE ($OBS_REMOTE_PCT %), latency $OBS_LAT; nodes $OBS_NODES (exit $OBS_RC)"
}

# Threads of COMM in MB_TIDFILE with at least MIN_SHARE % of the bios, and how
# many of them had more than PCT % of their bios from node 1 / node 0.
# Sets MB_JOBS MB_JOBS_N1 MB_JOBS_N0.
tid_split() { # COMM PCT [MIN_SHARE]
	local comm=$1 pct=$2 min=${3:-5}
	read -r MB_JOBS MB_JOBS_N1 MB_JOBS_N0 < <(awk -v comm="$comm" -v pct="$pct" -v min="$min" -v tot="$MB_TOTAL" '
		$2 == comm && tot > 0 && 100 * ($3 + $4) / tot >= min {
			j++; if ($5 > pct) n1++; if (100 - $5 > pct) n0++
		}
		END { printf "%d %d %d\n", j, n1, n0 }' "$MB_TIDFILE")
}

# run_pinned_then_free START_CPUS AFTER_S ALL_CPUS COMMAND...
# Starts COMMAND on START_CPUS, then after AFTER_S seconds allows it (and its
# child processes, all threads) on ALL_CPUS: the tasks begin on the "wrong"
# node and a scheduler has to move them. Given a narrower ALL_CPUS, it takes
# away CPUs instead (guest-scheduler.sh 5b). Returns COMMAND's status.
# The moment the last process was moved is marked for measure_bios_during:
# pgrep and each taskset are programs started over the guest's 9p root, and
# on the 6.12 guest the move ended 4 s after the 5 s asked (5b read 89.5 %
# node 0 after a fixed 7 s; every bio after the move came from node 0).
run_pinned_then_free() {
	local start=$1 after=$2 all=$3 p pid t0=$SECONDS
	shift 3
	taskset -c "$start" "$@" &
	p=$!
	sleep "$after"
	for pid in "$p" $(pgrep -P "$p"); do
		taskset -a -p -c "$all" "$pid" >/dev/null 2>&1
	done
	[[ -n $ESN_BT_OUT ]] && _bt_ticks >"$ESN_WORK/mb.mark"
	echo "run_pinned_then_free: $p and its children moved to CPUs $all $((SECONDS - t0)) s after the start"
	wait "$p"
}

# stats_sum NAME [FILE]: the sum of counter NAME over scx_esn's --stats
# lines in FILE (stdin without one); 0 when it never appears.
stats_sum() {
	grep -oE " $1=[0-9]+" "${2:--}" | awk -F= '{ s += $2 } END { print s + 0 }'
}

fio_iops() { # the read IOPS of the last fio run in commands.log
	grep -o 'read: IOPS=[^,]*' "$ESN_WORK/commands.log" | tail -n1 | cut -d= -f2
}

# ------------------------------------------------------------ the NUMA lab --
LAB_PID=
# esn_nap SECS: a sleep that starts no process. Every program the guest
# starts loads its libraries again over the uncached 9p root, and under TCG
# that takes the vCPUs a measurement runs on: lab_start's wait, a grep and a
# sleep every 0.3 s, ran beside the lab's own calibration reads, which read
# the disk 1.3-2x slower than fio did right after (CI of 2026-11-28: lab off
# local 913 us, fio 458 us) and put --factor 2.0 at 2.565. The FIFO is not
# in $ESN_WORK: esn_save's cp would block reading it.
ESN_NAP_FIFO=/tmp/esn-nap.fifo
esn_nap() {
	if [[ -z ${ESN_NAP_FD:-} ]]; then
		mkfifo "$ESN_NAP_FIFO" 2>/dev/null || [[ -p $ESN_NAP_FIFO ]] || { sleep "$1"; return 0; }
		exec {ESN_NAP_FD}<>"$ESN_NAP_FIFO"
	fi
	read -r -t "$1" -u "$ESN_NAP_FD" _ || true
}

# first_line_with PREFIX FILE: sets FIRST_LINE to FILE's first line starting
# with PREFIX, with bash alone: no grep, and no subshell (see esn_nap).
first_line_with() {
	local line
	FIRST_LINE=
	[[ -r $2 ]] || return 1
	while IFS= read -r line; do
		[[ $line == "$1"* ]] && { FIRST_LINE=$line; return 0; }
	done <"$2"
	return 1
}

# lab_start ARGS...: tests/lab/remote-penalty ARGS in the background; waits
# for its "active" line (calibration takes --calibrate-secs) and sets
# LAB_LINE to it. Returns 1 (with the reason in LAB_LINE) if it did not start.
# The wait starts no process while the lab calibrates (see esn_nap).
lab_start() {
	local t0=$SECONDS
	LAB_OUT=$ESN_WORK/lab.out LAB_ERR=$ESN_WORK/lab.err LAB_LINE=
	# Emptied here, not by the background job's redirection: that runs in
	# the child, and the wait below could first read the last lab's line.
	: >"$LAB_OUT"
	: >"$LAB_ERR"
	"$ESN_REPO/tests/lab/remote-penalty" "$@" >"$LAB_OUT" 2>"$LAB_ERR" </dev/null &
	LAB_PID=$!
	while ! first_line_with 'remote-penalty: active' "$LAB_OUT"; do
		if ! kill -0 "$LAB_PID" 2>/dev/null || ((SECONDS - t0 > 120)); then
			LAB_LINE="did not start: $(tr '\n' ' ' <"$LAB_ERR")"
			kill -KILL "$LAB_PID" 2>/dev/null
			wait "$LAB_PID" 2>/dev/null
			LAB_PID=
			return 1
		fi
		esn_nap 1
	done
	LAB_LINE=$FIRST_LINE
	say "lab: $LAB_LINE"
}

# lab_stop: SIGINT, bounded wait; sets LAB_RC and LAB_REMOTE / LAB_LOCAL (the
# requests it delayed / saw local, from its exit line), LAB_MEAN_US and
# LAB_LATE_PCT (the share of spins more than 10 % over their time).
lab_stop() {
	LAB_RC=-1 LAB_REMOTE=-1 LAB_LOCAL=-1 LAB_MEAN_US=-1 LAB_LATE_PCT=-1
	[[ -n $LAB_PID ]] || return 0
	stop_with_sigint "$LAB_PID" 30 || say "lab: did not exit within 30 s of SIGINT; killed it"
	wait "$LAB_PID"
	LAB_RC=$?
	LAB_PID=
	read -r LAB_REMOTE LAB_MEAN_US LAB_LATE_PCT LAB_LOCAL < <(sed -n 's/^remote-penalty: removed; \([0-9]*\) remote requests delayed (mean \([0-9.]*\) us, \([0-9.]*\) % more than 10 % late.*), \([0-9]*\) local$/\1 \2 \3 \4/p' "$LAB_ERR")
	LAB_REMOTE=${LAB_REMOTE:--1} LAB_LOCAL=${LAB_LOCAL:--1} LAB_MEAN_US=${LAB_MEAN_US:--1} LAB_LATE_PCT=${LAB_LATE_PCT:--1}
	say "lab: stopped (exit $LAB_RC): $(tail -n1 "$LAB_ERR")"
}

# fio_clat_pair DEV LOCAL_CPUS REMOTE_CPUS ROUNDS SECS: one fio job (4k
# randread, psync) pinned to LOCAL_CPUS, then to REMOTE_CPUS, ROUNDS times,
# SECS each, alternating (ABBA) so drift hits both sides alike. Sets
# PAIR_LOCAL_US PAIR_REMOTE_US (mean completion latency over all I/Os of a
# side, fio's own figure), PAIR_LOCAL_IOS PAIR_REMOTE_IOS, PAIR_ROUNDS (each
# round's remote / local) and PAIR_RATIO, the median of the rounds' ratios:
# each round's two sides run back to back, so a host that slows the guest for
# a few seconds (a CI neighbour) spoils one round's ratio, not the verdict.
# A mean over all I/Os let one such stretch decide it (CI, once: 0.886 with
# the lab off). PAIR_P50_EXTRAS: each round's remote - local median
# completion latency (fio's p50, us), PAIR_P50_EXTRA_US their median: how far
# a fixed delay shifted the remote side, unmoved by the few requests a host
# stall holds up for milliseconds (they move a mean by tens of us).
fio_clat_pair() {
	local dev=$1 lcpus=$2 rcpus=$3 rounds=$4 secs=$5 r side cpus vars
	local files=()
	local order
	for r in $(seq 1 "$rounds"); do
		# ABBA: which side goes first alternates, so a linear drift cancels.
		order="local remote"
		((r % 2 == 0)) && order="remote local"
		for side in $order; do
			cpus=$lcpus
			[[ $side == remote ]] && cpus=$rcpus
			fio_randread_args "$dev" 1 "$secs" --cpus_allowed="$cpus" \
				--output-format=json --output="$ESN_WORK/pair.$side.$r.json"
			"${FIO[@]}" >>"$ESN_WORK/commands.log" 2>&1
			files+=("$ESN_WORK/pair.$side.$r.json")
		done
	done
	vars=$(python3 - "${files[@]}" <<'PY'
import json, re, statistics, sys
acc = {"local": [0, 0.0], "remote": [0, 0.0]}
rounds = {}
p50s = {}
for f in sys.argv[1:]:
    side, rnd = re.search(r"\.(local|remote)\.(\d+)\.json$", f).groups()
    j = json.load(open(f))["jobs"][0]["read"]
    n = j["total_ios"]
    acc[side][0] += n
    acc[side][1] += n * j["clat_ns"]["mean"]
    rounds.setdefault(int(rnd), {})[side] = j["clat_ns"]["mean"]
    p50s.setdefault(int(rnd), {})[side] = j["clat_ns"].get("percentile", {}).get("50.000000")
l, r = (acc[s][1] / max(1, acc[s][0]) / 1e3 for s in ("local", "remote"))
ratios = [v["remote"] / v["local"] for _, v in sorted(rounds.items()) if v.get("local") and "remote" in v]
if not ratios:
    sys.exit("no round has both sides")
extras = [(v["remote"] - v["local"]) / 1e3 for _, v in sorted(p50s.items())
          if v.get("local") is not None and v.get("remote") is not None]
print(f"PAIR_LOCAL_US={l:.1f} PAIR_REMOTE_US={r:.1f} PAIR_RATIO={statistics.median(ratios):.3f} "
      f"PAIR_LOCAL_IOS={acc['local'][0]} PAIR_REMOTE_IOS={acc['remote'][0]} "
      f"PAIR_ROUNDS='{' '.join(f'{x:.2f}' for x in ratios)}' "
      f"PAIR_P50_EXTRA_US={statistics.median(extras) if extras else 0:.1f} "
      f"PAIR_P50_EXTRAS='{' '.join(f'{x:.1f}' for x in extras)}'")
PY
) || { PAIR_RATIO=0; say "fio_clat_pair: could not read fio's output"; return 1; }
	eval "$vars"
	say "pinned clat: local $PAIR_LOCAL_US us ($PAIR_LOCAL_IOS I/Os), remote $PAIR_REMOTE_US us ($PAIR_REMOTE_IOS I/Os): ratio $PAIR_RATIO (median of rounds $PAIR_ROUNDS)"
}

# within X LO HI: is LO <= X <= HI (decimals allowed)?
within() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x + 0 >= lo + 0 && x + 0 <= hi + 0) }'; }

# ------------------------------------------------------------- verdicts -----
: >"$ESN_SUMMARY"
check() { # NAME OK FIGURE
	local name=$1 ok=$2 fig=$3 v=PASS
	[[ $ok == 1 ]] || v=FAIL
	[[ $ok == info ]] && v=info
	printf '%s\t%s\t%s\n' "$v" "$name" "$fig" >>"$ESN_SUMMARY"
	say "$v: $name: $fig"
}

summary_print() {
	echo
	echo "==================== summary ===================="
	awk -F'\t' '{ printf "%-5s %-50s %s\n", $1, $2, $3 }' "$ESN_SUMMARY"
	echo "================================================="
	! grep -q '^FAIL' "$ESN_SUMMARY"
}

# pct_ge A B: is the percentage A >= B (decimals allowed)?
pct_ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

finish() { # write OUTDIR/result from the summary and exit accordingly
	esn_save
	if summary_print; then
		echo PASS >"$ESN_OUTDIR/result"
		exit 0
	fi
	echo FAIL >"$ESN_OUTDIR/result"
	exit 1
}
