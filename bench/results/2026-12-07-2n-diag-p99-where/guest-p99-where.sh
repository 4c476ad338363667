#!/usr/bin/env bash
# Diagnostic (not a test): fio 2 jobs, lab at 2.0, EEVDF and scx_esn (learning,
# as the bench runs it), p99-where.bt recording where the tail goes.
set -u
. "$ESN_REPO/tests/vm/guest-lib.sh"
here=$ESN_REPO/bench/results/2026-12-07-2n-diag-p99-where
dev=$(nvme_dev_on_node 1)
out=$ESN_OUTDIR
"$ESN_REPO/tests/lab/remote-penalty" --factor 2.0 >"$out/lab.out" 2>"$out/lab.err" &
lab=$!
for _ in $(seq 360); do grep -q "remote-penalty: active" "$out/lab.out" && break; sleep 0.5; done
head -3 "$out/lab.out"
run_one() { # NAME CMD...
	local name=$1; shift
	local spid=
	if (($#)); then
		"$@" > "$ESN_WORK/$name.sched" 2>&1 &
		spid=$!
		for _ in $(seq 60); do [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break; sleep 0.5; done
		sleep 2
	fi
	bpftrace "$here/p99-where.bt" > "$ESN_WORK/$name.bt" 2>&1 &
	local bt=$!
	for _ in $(seq 240); do grep -q ATTACHED "$ESN_WORK/$name.bt" && break; sleep 1; done
	fio --output-format=json --output="$ESN_WORK/$name.fio.json" --group_reporting --name=d0 --filename="$dev" --readonly --rw=randread --bs=4k --direct=1 --ioengine=psync --iodepth=1 --numjobs=2 --time_based --runtime=8 --ramp_time=2
	kill -INT $bt; wait $bt
	if [[ -n $spid ]]; then kill -INT $spid; wait $spid; fi
	cp -f "$ESN_WORK"/$name.* "$out"/
	python3 -c "
import json;j=json.load(open('$ESN_WORK/$name.fio.json'))['jobs'][0]['read'];p=j['clat_ns']['percentile']
print('$name', 'iops', round(j['iops']), 'p50', p['50.000000']/1e3, 'p90', p['90.000000']/1e3, 'p99', p['99.000000']/1e3, 'p99.9', p['99.900000']/1e3)" | tee -a "$out/summary"
	sleep 2
}
for r in $(seq "${DIAG_ROUNDS:-2}"); do
	run_one eevdf$r
	run_one esn$r "$ESN_REPO/target/release/scx_esn" --no-state --stats 1 --control-interval 1
done
kill -INT $lab; wait $lab
echo PASS > "$out/result"
