#!/usr/bin/env bash
# Diagnostic (not a test): where scx_esn's own userspace spends its CPU under
# the bench's io-1 (lab off), started with the bench's learning arguments.
# Without DIAG_BASE: one build (DIAG_NEW, default target/release/scx_esn)
# with and without --stats, then under strace -c and perf record. With
# DIAG_BASE: it and DIAG_NEW interleaved for DIAG_ROUNDS rounds (3), then
# DIAG_NEW under strace -c.
set -u
. "$ESN_REPO/tests/vm/guest-lib.sh"
dev=$(nvme_dev_on_node 1)
out=$ESN_OUTDIR
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
one() { # NAME MODE BINARY [extra scx_esn args]
	local name=$1 mode=$2 ESN=$3; shift 3
	"$ESN" --no-state --control-interval 1 "$@" > "$ESN_WORK/$name.sched" 2>&1 &
	local spid=$!
	for _ in $(seq 60); do [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break; sleep 0.5; done
	sleep 2
	fio --output-format=json --output="$ESN_WORK/$name.fio.json" --name=d0 --filename="$dev" --readonly --rw=randread --bs=4k --direct=1 --ioengine=psync --iodepth=1 --numjobs=1 --time_based --runtime=12 --ramp_time=1 &
	local fpid=$!
	sleep 2
	local t0 t1 s0 s1
	t0=$(ticks $spid); s0=$(date +%s.%N)
	case $mode in
	strace) timeout -s INT 8 strace -c -f -p $spid -o "$ESN_WORK/$name.strace" ;;
	perf) perf record -F 499 -g -p $spid -o "$ESN_WORK/$name.perf.data" -- sleep 8 > /dev/null 2>&1 ;;
	*) sleep 8 ;;
	esac
	t1=$(ticks $spid); s1=$(date +%s.%N)
	wait $fpid
	kill -INT $spid; wait $spid
	python3 -c "
import json;j=json.load(open('$ESN_WORK/$name.fio.json'))['jobs'][0]['read']
print('$name', 'iops', round(j['iops']), 'daemon_pct_of_cpu', round(100*($t1-$t0)/$(getconf CLK_TCK)/($s1-$s0),2))" | tee -a "$out/summary"
	[[ $mode == perf ]] && perf report -i "$ESN_WORK/$name.perf.data" --stdio --no-children --sort symbol 2>/dev/null | head -120 > "$out/$name.perf.txt"
	[[ $mode == perf ]] && perf report -i "$ESN_WORK/$name.perf.data" --stdio --no-children --sort dso 2>/dev/null | head -40 > "$out/$name.perfdso.txt"
	cp -f "$ESN_WORK/$name.sched" "$ESN_WORK/$name".strace "$out"/ 2>/dev/null
	sleep 2
}
new=${DIAG_NEW:-$ESN_REPO/target/release/scx_esn}
if [[ -z ${DIAG_BASE:-} ]]; then
	for r in $(seq "${DIAG_ROUNDS:-1}"); do
		one plain$r plain "$new" --stats 1
		one nostats$r plain "$new"
		one strace$r strace "$new" --stats 1
		one perf$r perf "$new" --stats 1
	done
else
	for r in $(seq "${DIAG_ROUNDS:-3}"); do
		one base$r plain "$DIAG_BASE" --stats 1
		one new$r plain "$new" --stats 1
	done
	one newstrace strace "$new" --stats 1
fi
echo PASS > "$out/result"
