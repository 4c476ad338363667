#!/usr/bin/env bash
# Diagnostic (not a test): fio 2 jobs beside stress-ng --cpu 4, started as
# the bench does (fio first), under EEVDF, the sched_ext floor (no BPF
# callbacks) and scx_esn, with hog-where.bt recording where each request
# cycle's time goes. DIAG_ROUNDS rounds (default 2).
set -u
. "$ESN_REPO/tests/vm/guest-lib.sh"
here=$ESN_REPO/bench/results/2026-12-05-2n-diag-hog-where
dev=$(nvme_dev_on_node 1)
out=$ESN_OUTDIR
run_one() { # NAME CMD...
	local name=$1; shift
	local spid=
	if (($#)); then
		"$@" > "$ESN_WORK/$name.sched" 2>&1 &
		spid=$!
		for _ in $(seq 60); do [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break; sleep 0.5; done
		sleep 2
	fi
	bpftrace "$here/hog-where.bt" > "$ESN_WORK/$name.bt" 2>&1 &
	local bt=$!
	for _ in $(seq 240); do grep -q ATTACHED "$ESN_WORK/$name.bt" && break; sleep 1; done
	fio --output-format=json --output="$ESN_WORK/$name.fio.json" --group_reporting --name=d0 --filename="$dev" --readonly --rw=randread --bs=4k --direct=1 --ioengine=psync --iodepth=1 --numjobs=2 --time_based --runtime=8 --ramp_time=2 &
	local fpid=$!
	stress-ng --cpu 4 --timeout 60s --metrics-brief > "$ESN_WORK/$name.hog" 2>&1 &
	local hog=$!
	wait $fpid
	kill -INT $hog; wait $hog
	kill -INT $bt; wait $bt
	if [[ -n $spid ]]; then kill -INT $spid; wait $spid; fi
	cp -f "$ESN_WORK"/$name.* "$out"/
	python3 -c "
import json;j=json.load(open('$ESN_WORK/$name.fio.json'))['jobs'][0]['read'];p=j['clat_ns']['percentile']
print('$name', 'iops', round(j['iops']), 'p50', p['50.000000']/1e3, 'p99', p['99.000000']/1e3)" | tee -a "$out/summary"
	sleep 2
}
for r in $(seq "${DIAG_ROUNDS:-2}"); do
	run_one eevdf$r
	run_one floor$r "$ESN_REPO/target/release/esn-scx-floor"
	run_one esn$r "$ESN_REPO/target/release/scx_esn" --no-state
done
echo PASS > "$out/result"
