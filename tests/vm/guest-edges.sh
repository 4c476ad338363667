#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh, ESN_VM_TOPOLOGY=1n): the odd machine and the
# mistakes an operator makes, each with its one-line error and exit status.
#   A. one node, no NVMe: `scx_esn topology` says so; the scheduler loads,
#      schedules stress-ng and a shell loop fork-exec'ing a static program
#      from tmpfs as a plain fair scheduler (nothing placed, no error; the
#      two CPUs' split between the loop and the hogs no further from fair
#      than EEVDF's, both CPUs as busy, the hogs' bogo ops per CPU-second
#      >= 0.8x and forks >= 0.5x EEVDF's in the same boot, the median of five
#      windows each, interleaved; the shell's wake-ups preempted the hogs:
#      fair_preempt > 0), and SIGINT: exit 0. The same loop exec'ing
#      /bin/true over the VM's 9p root is reported beside it,
#      not judged (see fair_load).
#   B. the stats socket is root's: mode 600; `scx_esn --monitor` run as
#      nobody exits 1 at once with "permission denied ... run as root".
#   C. a second scx_esn while the first runs: exit 1 naming the scheduler
#      that is loaded; the first one still enabled.
#   D. --stats-group: the socket is 660 and group-owned, and a member of the
#      group (nobody:nogroup) reads one JSON interval through it; a group that
#      does not exist: exit 1 before anything loads.
#   E. --prometheus on a port already in use: exit 1, "cannot listen there",
#      nothing loaded.
#   F. not root: exit 1 "needs root", nothing loaded.
#   G. a command line that would do nothing (`--threshold 2 observe`): exit 2
#      in one line, nothing loaded.
#   H. --dvfs in a VM without cpufreq: said once, the scheduler runs and
#      exits 0 on SIGINT; `restore-freq` with no record: exit 0; with a record
#      it cannot write back: exit 1, the record kept.
#   W. energy without RAPL: the --stats intervals of A carry an
#      "energy (estimated)" line; `scx_esn energy` says "estimated", and its
#      watts follow the load: >= 85 W with stress-ng on both CPUs, <= 60 W
#      idle (the model's 95 W busy, 47 W at most idle); bad --energy-watts:
#      exit 2.
#   P. the binary of `make deb`'s package (unpacked) loads, and SIGINT: exit 0.
# Every refusal: no "panicked" in the output, sched_ext "disabled" after it.
#
# Environment: ESN_BIN (default $ESN_REPO/target/release/scx_esn).
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

# The binary is copied where nobody may execute it: the repository may sit
# under a directory only root can enter.
bin=$ESN_WORK/scx_esn
install -m 0755 "${ESN_BIN:-$ESN_REPO/target/release/scx_esn}" "$bin"
sched_out=$ESN_WORK/scx_esn.stdout
sched_err=$ESN_WORK/scx_esn.stderr
socket=/var/run/scx/root/stats
as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)

cleanup() {
	sched_kill
	[[ -n ${holder_pid:-} ]] && kill "$holder_pid" 2>/dev/null
	if [[ -s $sched_err ]]; then
		echo "----- scx_esn stderr (last 30 lines) -----"
		tail -n 30 "$sched_err"
		echo "-----"
	fi
	echo "sched_ext lines in dmesg:"
	dmesg | grep -iE 'sched_ext' | sed 's/^/    /'
}
finish_all() { cleanup; finish; }

# refused NAME WANT_RC PATTERN CMD...: CMD must exit WANT_RC within 60 s
# with one line of output holding PATTERN, no panic, and leave sched_ext
# disabled unless
# a scheduler of ours is running on purpose (ALLOW_LOADED=1).
refused() {
	local name=$1 want=$2 pattern=$3 rc=0 out state ok=0 lines
	shift 3
	out=$(timeout 60 "$@" 2>&1 </dev/null) || rc=$?
	state=$(sx_state)
	lines=$(grep -c . <<<"$out")
	if [[ $rc == "$want" && $lines == 1 && $out == *$pattern* && $out != *panicked* ]] &&
		{ [[ ${ALLOW_LOADED:-0} == 1 ]] || [[ $state == disabled ]]; }; then
		ok=1
	fi
	check "$name" "$ok" "exit $rc (want $want), $lines line(s), sched_ext $state: $(tail -n1 <<<"$out")"
}

say "edges test on $(uname -r): $(ls -d /sys/devices/system/node/node* | wc -l) node(s), $(nproc) CPUs"
[[ -d /sys/kernel/sched_ext ]] || { check "sched_ext in the kernel" 0 "/sys/kernel/sched_ext missing"; finish_all; }

# ---- A. one node, no NVMe: a plain fair scheduler -----------------------------
topo=$("$bin" topology --json 2>&1)
verdict=$(python3 -c '
import json, sys
t = json.loads(sys.argv[1])
nodes = t["nodes"]
nvme = [d["name"] for d in t["devices"] if d["kind"] == "nvme"]
print(int(len(nodes) == 1 and not nvme), f"{len(nodes)} node(s), NVMe disks: {nvme}")
' "$topo" 2>&1) || verdict="0 topology --json unreadable: $topo"
check "A topology: one node, no NVMe" "${verdict%% *}" "${verdict#* }"

# A program that only exits, static and on tmpfs, so an exec reads nothing
# over the VM's 9p root. Every fork-exec of /bin/true makes ~40 9p requests,
# and in single-threaded TCG the answer to one submitted from the vCPU that
# takes 9p's interrupt waits ~2.6 ms under scx_esn when a hog runs there
# against ~1.0 under EEVDF (an emulator effect: a device interrupt into a busy
# vCPU is taken late; bench/results/2026-12-02-1n-fork-loop.md). That loop
# read scx_esn 0.43-0.71x EEVDF's forks, while this one reads 1.1-1.5x (bogo
# ops 0.81-0.94x) in the same boots (bench/results/2026-12-07-1n-fork-loop-tmpfs.md).
# EEVDF's 9p figure is the unsteady one (53-105 a window, scx_esn's 43-49), so
# the tmpfs loop is judged and the 9p one reported: EEVDF leaves a CPU idle
# 4-11 % of a window, where a 9p reply is taken at once, and forks more the
# more it idles; scx_esn keeps both CPUs busy (bench/results/2026-12-07-1n-fork-split.md).
exit_only=$ESN_WORK/exit-only
printf '%s\n' 'void _start(void) { __asm__ volatile("mov $60, %%eax\n xor %%edi, %%edi\n syscall" ::: "memory"); }' >"$exit_only.c"
cc -O2 -static -nostdlib -o "$exit_only" "$exit_only.c" 2>"$exit_only.err" ||
	{ check "A a static program to fork-exec (cc)" 0 "$(head -c 300 "$exit_only.err")"; finish_all; }

# shell_ticks OWN KIDS: this shell's CPU time in clock ticks into the
# variables named, its own (user + system) and its reaped children's.
# Builtins only: no fork or exec lands in the time read, and none waits on
# 9p beside the hogs.
shell_ticks() {
	local stat fields
	read -r stat </proc/$$/stat
	# After "pid (comm) ": utime, stime, cutime, cstime are fields 12-15.
	read -r -a fields <<<"${stat##*) }"
	printf -v "$1" %d $((fields[11] + fields[12]))
	printf -v "$2" %d $((fields[13] + fields[14]))
}
clk_tck=$(getconf CLK_TCK)

# fair_load [PROGRAM]: stress-ng on both CPUs beside a shell loop that
# fork-execs PROGRAM (the static one above) for 9.5 s; sets FORKS and BOGO
# (stress-ng's bogo ops over its 10 s), LOOP_CPUS and HOG_CPUS (the CPUs the
# loop, this shell and the programs it waited for, and stress-ng used on
# average over the loop's window) and BOGO_PER_CPU_S (bogo ops per second of
# stress-ng's CPU time). All of it is fair-path work. The loop stops before
# stress-ng does so that stress-ng's time is not yet among this shell's
# reaped children's when the window closes; its workers' is read off them.
fair_load() {
	local program=${1:-$exit_only} t0 t1 own0 kids0 own1 kids1 own2 kids2
	local loop_end_us hog_ns=0 pid ns workers=()
	shell_ticks own0 kids0
	t0=$EPOCHREALTIME
	loop_end_us=$((${t0/./} + 9500000))
	stress-ng --cpu 2 --timeout 10s --temp-path "$ESN_WORK" --metrics-brief >"$ESN_WORK/stress.log" 2>&1 &
	local stress_pid=$!
	FORKS=0
	while ((${EPOCHREALTIME/./} < loop_end_us)); do "$program" && FORKS=$((FORKS + 1)); done
	t1=$EPOCHREALTIME
	shell_ticks own1 kids1
	# Builtins only here too: a pgrep started over 9p beside the hogs took
	# seconds, and the workers were gone.
	{ read -r -a workers <"/proc/$stress_pid/task/$stress_pid/children"; } 2>/dev/null
	for pid in "$stress_pid" "${workers[@]}"; do
		{ read -r ns _ <"/proc/$pid/schedstat" && hog_ns=$((hog_ns + ns)); } 2>/dev/null
	done
	wait "$stress_pid"
	STRESS_RC=$?
	shell_ticks own2 kids2
	BOGO=$(awk '/metrc:/ && $4 == "cpu" { print $5; exit }' "$ESN_WORK/stress.log")
	read -r LOOP_CPUS HOG_CPUS BOGO_PER_CPU_S < <(awk -v hz="$clk_tck" -v t0="$t0" -v t1="$t1" \
		-v loop="$((own1 - own0 + kids1 - kids0))" -v hog_ns="$hog_ns" \
		-v stress="$((kids2 - kids1))" -v bogo="${BOGO:-0}" \
		'BEGIN { printf "%.3f %.3f %.1f\n", loop / hz / (t1 - t0), hog_ns / 1e9 / (t1 - t0), (stress > 0 ? bogo * hz / stress : 0) }')
}
# median_of N...: the middle one of an odd count of figures.
median_of() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }

# Five rounds, each an EEVDF window and then a scx_esn window (loaded for it,
# stopped after it but for the last), and each scheduler judged by the median
# of its five. The host is shared: a burst of its load in one 10 s window cost
# scx_esn 0.77x in CI (a boot that took 47 s instead of 21-25), and one window
# is thrown out either way. Interleaved, not five EEVDF windows first, so a
# drift along the boot falls on both: with EEVDF's windows first its bogo ops
# read 782-1014 over three boots, and one set its five at 957-1014 against
# ours at 749-829 (0.81x, at the bar). Interleaving does not narrow EEVDF's
# spread itself (750-950 a window in two boots).
fair_load /bin/true
eevdf_9p_forks=$FORKS eevdf_9p_cpus="$LOOP_CPUS/$HOG_CPUS"
e_forks=() e_bogo=() s_forks=() s_bogo=()
e_loop=() e_hog=() e_eff=() s_loop=() s_hog=() s_eff=()
stress_rc=0 placed=0 errors=0 fair_preempts=0 stop_rcs=
for round in 1 2 3 4 5; do
	fair_load
	e_forks+=("$FORKS") e_bogo+=("${BOGO:-0}")
	e_loop+=("$LOOP_CPUS") e_hog+=("$HOG_CPUS") e_eff+=("$BOGO_PER_CPU_S")
	((STRESS_RC != 0)) && stress_rc=$STRESS_RC
	if ! sched_start "$sched_out" "$sched_err" 60 "$bin" --stats 1 --no-state; then
		check "A loads on one node without NVMe" 0 "round $round: $SCHED_WHY; $(tail -n 3 "$sched_err")"
		finish_all
	fi
	((round == 1)) && check "A loads on one node without NVMe" 1 "enabled after ${SCHED_TOOK}s"
	fair_load
	s_forks+=("$FORKS") s_bogo+=("${BOGO:-0}")
	s_loop+=("$LOOP_CPUS") s_hog+=("$HOG_CPUS") s_eff+=("$BOGO_PER_CPU_S")
	((STRESS_RC != 0)) && stress_rc=$STRESS_RC
	state=$(sx_state)
	placed=$((placed + $(grep -cE 'placed [1-9]' "$sched_out" || true)))
	errors=$((errors + $(grep -ciE 'panicked|stall|error' "$sched_err" || true)))
	fair_preempts=$((fair_preempts + $(stats_sum fair_preempt "$sched_out")))
	[[ $state == enabled ]] || break
	((round == 5)) && break
	kill -INT "$sched_pid"
	if ! sched_wait_exit 20; then
		check "A stops between rounds" 0 "round $round: scx_esn still runs 20 s after SIGINT"
		finish_all
	fi
	stop_rcs+="$SCHED_RC "
	[[ $SCHED_RC == 0 ]] || errors=$((errors + 1))
done
for v in "${e_bogo[@]}" "${s_bogo[@]}"; do [[ $v =~ ^[0-9]+$ ]] || errors=$((errors + 1)); done
# A CPU time not read (empty, or no time at all) is an error, not a zero.
for v in "${e_loop[@]}" "${s_loop[@]}" "${e_hog[@]}" "${s_hog[@]}" "${e_eff[@]}" "${s_eff[@]}"; do
	[[ $v =~ ^[0-9]+\.[0-9]+$ && ! $v =~ ^0\.0+$ ]] || errors=$((errors + 1))
done
eevdf_forks=$(median_of "${e_forks[@]}") eevdf_bogo=$(median_of "${e_bogo[@]}")
FORKS=$(median_of "${s_forks[@]}") BOGO=$(median_of "${s_bogo[@]}")
eevdf_loop=$(median_of "${e_loop[@]}") eevdf_hog=$(median_of "${e_hog[@]}") eevdf_eff=$(median_of "${e_eff[@]}")
loop_cpus=$(median_of "${s_loop[@]}") hog_cpus=$(median_of "${s_hog[@]}") eff=$(median_of "${s_eff[@]}")
# Same boot, same load, judged on the split of the two CPUs and on what the
# hogs make of theirs. Three always-runnable parties (the loop is one: the
# shell waits while its child runs) share 2 CPUs fairly at 2/3 of a CPU each,
# in the guest's CPU time, which is what a guest scheduler divides. EEVDF
# mostly gives the loop more, and not steadily: 0.87-0.99 of a CPU a window
# in two boots, 0.60-0.93 in a third, whose median 0.64 failed scx_esn's
# steady 0.85 here (CI, 2026-12-07). Since scx_esn queues a new task one
# slice past its node's clock it gives the loop 0.61-0.70
# (bench/results/2026-12-07-1n-fork-debit.md). Every exec costs TCG fresh
# translation, so a share buys fewer forks than a native CPU's.
# scx_esn must be at least as close to 2/3 as EEVDF is (+0.1 of a CPU), keep
# the CPUs as busy (loop + hogs >= 0.9x EEVDF's), make >= 0.8x EEVDF's bogo
# ops per second of the hogs' CPU time, and fork >= 0.5x as often. This
# replaces bogo ops against EEVDF's, a bar that mixed the split, the hogs'
# speed per CPU-second and a window's noise in one figure
# (bench/results/2026-12-07-1n-fork-split.md).
ok=0
if [[ $stress_rc == 0 && $state == enabled && $placed == 0 && $errors == 0 ]] &&
	((${#s_forks[@]} == 5 && fair_preempts > 0)) &&
	awk -v f="$FORKS" -v ef="$eevdf_forks" -v l="$loop_cpus" -v el="$eevdf_loop" \
		-v h="$hog_cpus" -v eh="$eevdf_hog" -v e="$eff" -v ee="$eevdf_eff" '
		function abs(x) { return x < 0 ? -x : x }
		BEGIN { exit !(f >= 0.5 * ef && abs(l - 2 / 3) <= abs(el - 2 / 3) + 0.1 &&
			l + h >= 0.9 * (el + eh) && e >= 0.8 * ee) }'; then
	ok=1
fi
check "A schedules CPU work as a fair scheduler" "$ok" \
	"median of 5 interleaved windows each: the loop's CPUs $loop_cpus (EEVDF $eevdf_loop; fair 0.667, no further from it than EEVDF + 0.1), the hogs' $hog_cpus (EEVDF $eevdf_hog; the two >= 0.9x EEVDF's), bogo ops per hog CPU-second $eff (EEVDF $eevdf_eff, >= 0.8x), forks $FORKS (EEVDF $eevdf_forks, >= 0.5x), bogo ops $BOGO (EEVDF $eevdf_bogo); windows: scx_esn loop ${s_loop[*]}, hogs ${s_hog[*]}, forks ${s_forks[*]}, bogo ops ${s_bogo[*]}; EEVDF loop ${e_loop[*]}, hogs ${e_hog[*]}, forks ${e_forks[*]}, bogo ops ${e_bogo[*]}; fair wake-up preemptions $fair_preempts (> 0); state $state; intervals with placed tasks $placed; errors $errors (exits between rounds: ${stop_rcs:-none})"

fair_load /bin/true
check "A the loop exec'ing /bin/true over 9p (reported)" info \
	"one 10 s window each: scx_esn forks $FORKS, EEVDF $eevdf_9p_forks (ratio $(awk -v a="$FORKS" -v b="$eevdf_9p_forks" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')); the loop's CPUs/the hogs' $LOOP_CPUS/$HOG_CPUS (EEVDF $eevdf_9p_cpus)"

# W, from A's intervals: the model's estimate, labelled so.
estimated=$(grep -c '^energy (estimated): node 0 [0-9.]* W; total' "$sched_out" || true)
check "W --stats: energy labelled estimated" "$([[ $estimated -ge 1 ]] && echo 1 || echo 0)" \
	"$estimated interval(s): $(grep -m1 '^energy' "$sched_out")"

# ---- B. the stats socket is root's -------------------------------------------
mode=$(stat -c '%a %U' "$socket" 2>/dev/null || echo missing)
check "B stats socket mode" "$([[ $mode == "600 root" ]] && echo 1 || echo 0)" "$mode"
ALLOW_LOADED=1 refused "B --monitor as nobody: permission denied" 1 "permission denied" \
	"${as_nobody[@]}" "$bin" --monitor 1

# ---- C. another scheduler is loaded ------------------------------------------
ALLOW_LOADED=1 refused "C a second scx_esn: refused, names the first" 1 \
	"another sched_ext scheduler (esn" "$bin" --no-state
check "C the first one still runs" "$([[ $(sx_state) == enabled ]] && sched_alive && echo 1 || echo 0)" \
	"state $(sx_state), ops $(sx_ops)"

stop_with_sigint "$sched_pid" 30
sched_wait_exit 5
check "A SIGINT: exit 0, unloaded" "$([[ ${SCHED_RC:-x} == 0 && $(sx_state) == disabled ]] && echo 1 || echo 0)" \
	"exit ${SCHED_RC:-still running}, state $(sx_state)"

# ---- D. --stats-group --------------------------------------------------------
refused "D --stats-group of no group: refused" 1 "no such group" \
	"$bin" --no-state --stats-group no-such-group-here
if sched_start "$sched_out" "$sched_err" 60 "$bin" --no-state --stats-group nogroup; then
	mode=$(stat -c '%a %U %G' "$socket" 2>/dev/null || echo missing)
	line=$(timeout 30 "${as_nobody[@]}" "$bin" --monitor 1 --json 2>"$ESN_WORK/monitor.err" | head -n1)
	ok=0
	[[ $mode == "660 root nogroup" && $line == "{"* ]] && ok=1
	check "D --stats-group nogroup: its members read it" "$ok" \
		"socket $mode; nobody:nogroup read ${#line} bytes: ${line:0:60}"
	stop_with_sigint "$sched_pid" 30
	sched_wait_exit 5
else
	check "D --stats-group nogroup: its members read it" 0 "$SCHED_WHY"
fi

# ---- E. --prometheus on a port in use ----------------------------------------
# The holder takes whatever free port the kernel gives it (a fixed port can
# already be taken in the guest, and then scx_esn would get a free one).
held_port_file=$ESN_WORK/held-port
rm -f "$held_port_file"
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1]); time.sleep(120)' "$held_port_file" &
holder_pid=$!
for _ in $(seq 50); do [[ -s $held_port_file ]] && break; sleep 0.2; done
if [[ -s $held_port_file ]]; then
	held_port=$(cat "$held_port_file")
	refused "E --prometheus on a port in use" 1 "cannot listen there" \
		"$bin" --no-state --prometheus "127.0.0.1:$held_port"
else
	check "E --prometheus on a port in use" 0 "the port holder (python3) did not start"
fi
kill "$holder_pid" 2>/dev/null
holder_pid=

# ---- F. not root -------------------------------------------------------------
refused "F not root" 1 "needs root" "${as_nobody[@]}" "$bin" --no-state

# ---- G. an option that would do nothing ---------------------------------------
refused "G --threshold before observe: exit 2" 2 "does nothing with \`observe\`" \
	"$bin" --threshold 2 observe --duration 1

# ---- H. --dvfs without cpufreq; restore-freq ----------------------------------
if sched_start "$sched_out" "$sched_err" 60 "$bin" --no-state --dvfs; then
	sleep 2
	said=$(grep -c -- '--dvfs stays off: no CPU has cpufreq' "$sched_err" || true)
	stop_with_sigint "$sched_pid" 30
	sched_wait_exit 5
	ok=0
	[[ $said == 1 && ${SCHED_RC:-x} == 0 && $(sx_state) == disabled ]] && ok=1
	check "H --dvfs without cpufreq: said once, runs, exit 0" "$ok" \
		"said $said time(s): $(grep -m1 -o -- '--dvfs stays off: [^(]*' "$sched_err"); exit ${SCHED_RC:-still running}"
else
	check "H --dvfs without cpufreq: said once, runs, exit 0" 0 "$SCHED_WHY; $(tail -n 3 "$sched_err")"
fi
refused "H restore-freq without a record: nothing to do" 0 "no record at" \
	"$bin" restore-freq --record "$ESN_WORK/no-such-record.json"
# A record naming a CPU without cpufreq (as an offline one would be).
printf '{"limits":[{"cpu":0,"khz":1000000}]}\n' >"$ESN_WORK/record.json"
refused "H restore-freq that cannot write back: exit 1" 1 "keeps them" \
	"$bin" restore-freq --record "$ESN_WORK/record.json"
check "H restore-freq that cannot write back: the record kept" \
	"$(grep -q '"cpu": 0' "$ESN_WORK/record.json" 2>/dev/null && echo 1 || echo 0)" \
	"$(tr -d '\n ' <"$ESN_WORK/record.json" 2>/dev/null)"

# ---- W. energy without RAPL: the model -----------------------------------------
# watts_of JSON: the total watts of `scx_esn energy --json`, if estimated.
watts_of() {
	python3 -c 'import json, sys; e = json.loads(sys.argv[1]); print(e["watts"] if e["source"] == "estimated" and e["elapsed_s"] > 1 else "x")' "$1" 2>/dev/null || echo x
}
timeout 20 stress-ng --cpu 2 --timeout 6s --temp-path "$ESN_WORK" >/dev/null 2>&1 &
stress_pid=$!
sleep 1
busy_json=$(timeout 30 "$bin" energy --duration 3 --json 2>/dev/null)
wait "$stress_pid"
sleep 1
idle_json=$(timeout 30 "$bin" energy --duration 3 --json 2>/dev/null)
busy_w=$(watts_of "$busy_json") idle_w=$(watts_of "$idle_json")
ok=0
[[ $busy_w != x && $idle_w != x ]] &&
	awk -v b="$busy_w" -v i="$idle_w" 'BEGIN { exit !(b >= 85 && b <= 95.5 && i > 0 && i <= 60) }' && ok=1
check "W energy: estimated, follows the load" "$ok" \
	"busy (stress-ng on 2 CPUs) $busy_w W, idle $idle_w W; $busy_json"
refused "W bad --energy-watts: exit 2" 2 "BUSY,C1,C3,C6" "$bin" energy --energy-watts 1,2,3

# ---- P. the Debian package's binary -------------------------------------------
# The guest's root is the host's, read-only: the package is unpacked, not
# installed (tests/host/package.sh checks its maintainer scripts and unit).
deb=$(ls "$ESN_REPO"/build/deb/scx-esn_*.deb 2>/dev/null | head -n1)
if [[ -f $deb ]]; then
	deb_root=$ESN_WORK/deb-root
	mkdir -p "$deb_root"
	dpkg-deb -x "$deb" "$deb_root"
	if sched_start "$sched_out" "$sched_err" 60 "$deb_root/usr/bin/scx_esn" --no-state; then
		stop_with_sigint "$sched_pid" 30
		sched_wait_exit 5
		ok=0
		[[ ${SCHED_RC:-x} == 0 && $(sx_state) == disabled ]] && ok=1
		check "P the packaged binary loads and unloads" "$ok" \
			"$(basename "$deb"): enabled after ${SCHED_TOOK}s, exit ${SCHED_RC:-still running}; $(grep -m1 -o 'scx_esn [^ ]* [^ ]* started' "$sched_err")"
	else
		check "P the packaged binary loads and unloads" 0 "$SCHED_WHY"
	fi
else
	check "P the packaged binary loads and unloads" 0 "no build/deb/scx-esn_*.deb: run make deb first"
fi

cleanup
finish
