#!/usr/bin/env bash
# Diagnostic (not a test): fio 2 jobs + stress-ng --cpu 4 started together as
# the bench does (fio first), with and without the bench's referee bpftrace.
set -u
. "$ESN_REPO/tests/vm/guest-lib.sh"
dev=$(nvme_dev_on_node 1)
out=$ESN_OUTDIR
run_one() { # NAME CMD...
	local name=$1; shift
	local spid=
	if (($#)); then
		"$@" --no-state --stats 1 --control-interval 1 > "$ESN_WORK/$name.stats" 2>&1 &
		spid=$!
		for _ in $(seq 60); do [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break; sleep 0.5; done
		sleep 2
	fi
	echo "HOSTMARK start $name $(date +%s)" > /dev/console
	fio --output-format=json --output="$ESN_WORK/$name.fio.json" --group_reporting --name=d0 --filename="$dev" --readonly --rw=randread --bs=4k --direct=1 --ioengine=psync --iodepth=1 --numjobs=2 --time_based --runtime=8 --ramp_time=2 &
	local fpid=$!
	stress-ng --cpu 4 --timeout 60s --metrics-brief > "$ESN_WORK/$name.hog" 2>&1 &
	local hog=$!
	wait $fpid
	kill -INT $hog; wait $hog
	echo "HOSTMARK end $name $(date +%s)" > /dev/console
	if [[ -n $spid ]]; then kill -INT $spid; wait $spid; fi
	cp -f "$ESN_WORK"/$name.* "$out"/
	python3 -c "
import json;j=json.load(open('$ESN_WORK/$name.fio.json'))['jobs'][0]['read'];p=j['clat_ns']['percentile']
print('$name', 'iops', round(j['iops']), 'p50', p['50.000000']/1e3, 'p99', p['99.000000']/1e3)" | tee -a "$out/summary"
	sleep 2
}
if [[ ${DIAG_ROUNDS:-0} == 1 ]]; then
	for r in 1 2; do
		run_one eevdf$r
		run_one esn$r "$ESN_REPO/target-base/scx_esn-push" --no-fair-push
		run_one fair$r "$ESN_REPO/target-base/scx_esn-push" --io-min-score 1000000000
	done
	echo PASS > "$out/result"
	exit 0
fi
run_one eevdf-plain
run_one esn-plain "$ESN_REPO/target-base/scx_esn-push" --no-fair-push
bpftrace -B line "$ESN_REPO/tests/bench/bio-dev-node.bt" > "$ESN_WORK/bt.out" 2>&1 &
bt=$!
for _ in $(seq 240); do grep -q ESN_TICK "$ESN_WORK/bt.out" && break; sleep 1; done
echo "referee attached: $(grep -c ESN_TICK "$ESN_WORK/bt.out")" | tee -a "$out/summary"
run_one eevdf-bt
run_one esn-bt "$ESN_REPO/target-base/scx_esn-push" --no-fair-push
run_one eevdf-bt2
run_one esn-bt2 "$ESN_REPO/target-base/scx_esn-push" --no-fair-push
kill -INT $bt
run_one eevdf-plain2
run_one esn-plain2 "$ESN_REPO/target-base/scx_esn-push" --no-fair-push
echo PASS > "$out/result"
