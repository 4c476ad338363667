#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `scx_esn observe` on the host kernel, for real: fio does direct 4k random
# reads on a file of the disk under the build tree while observe watches that
# disk, and observe's totals are checked against fio's own figures:
#   - the requests charged to fio's processes within 5 % of the I/Os fio
#     issued, and the disk's read count at least 95 % of it (other readers
#     of the disk can only add);
#   - device latency p50 and p99 present, non-zero, p50 <= p99, and p50
#     within 3x of fio's completion latency p50 (log2 buckets);
#   - the top task is fio's job process, with about fio's I/O count.
# Run once per way of hooking the kernel: tp_btf from block_io_start (the
# default on 6.5+), raw tracepoints, starting at block_rq_insert, and with
# the kernel's issue times ignored (the path of queues the kernel does not
# stamp, which this machine's disk may not be one of: the issue hook must
# attach on demand and BPF time the issues), and with every histogram in
# the hash table (the path of keys whose direct-mapped slot is taken). Then
# `observe --json | head -1`: exit 0 without a panic when the reader leaves.
#
# Usage: tests/host/observe.sh [SECONDS]   (root; needs fio and python3)
# Environment: ESN_BIN (default target/release/scx_esn).
set -euo pipefail

source "$(dirname "$0")/lib.sh"
host_init observe bin fio python3
host_disk
runtime=${1:-8}
echo "observe host test: fio on $work ($source, disk $disk), ${runtime}s per mode"

file=$work/fio.dat
# Lay the file out first, so its writes are not part of the measurement.
fio --name=layout --filename="$file" --size=128M --rw=write --bs=1M \
	--direct=1 --output=/dev/null

fail=0
run_mode() { # NAME [observe flags]
	local name=$1
	shift
	local out=$work/observe-$name.jsonl err=$work/observe-$name.err
	local fio_json=$work/fio-$name.json
	"$bin" observe --json --interval 1 --duration $((runtime + 30)) \
		--device "$disk" --top 5 "$@" >"$out" 2>"$err" &
	local obs=$!
	local waited=0
	until grep -q "observing block I/O" "$err" 2>/dev/null; do
		if ! kill -0 "$obs" 2>/dev/null || ((waited >= 60)); then
			echo "FAIL $name: observe did not start"
			cat "$err"
			fail=1
			kill "$obs" 2>/dev/null || true
			wait "$obs" 2>/dev/null || true
			return
		fi
		sleep 0.5
		waited=$((waited + 1))
	done

	fio --name="obs-$name" --filename="$file" --size=128M --direct=1 \
		--rw=randread --bs=4k --ioengine=psync --numjobs=1 --time_based \
		--runtime="$runtime" --output-format=json --output="$fio_json" &
	local fio_pid=$!
	sleep 2
	# fio forks its job processes: remember them to recognise the top task.
	local pids
	pids="$fio_pid $(pgrep -P "$fio_pid" | xargs)"
	wait "$fio_pid"
	sleep 1
	kill -INT "$obs"
	local rc=0
	wait "$obs" || rc=$?
	if ((rc != 0)); then
		echo "FAIL $name: observe exited $rc after SIGINT"
		cat "$err"
		fail=1
		return
	fi
	python3 - "$name" "$out" "$fio_json" "$disk" "$pids" "$err" <<'EOF' || fail=1
import json, sys
name, out, fio_json, disk, pids, err = sys.argv[1:]
pids = {int(p) for p in pids.split()}
lines = [json.loads(l) for l in open(out) if l.strip()]
totals = [l for l in lines if l["kind"] == "total"]
intervals = [l for l in lines if l["kind"] == "interval"]
fio = json.load(open(fio_json))
issued = sum(j["read"]["total_ios"] for j in fio["jobs"])
ok = True
def check(what, cond, figure):
    global ok
    print(f"{'PASS' if cond else 'FAIL'} {name}: {what}: {figure}")
    ok = ok and cond
check("one total report after SIGINT", len(totals) == 1, f"{len(totals)} total, {len(intervals)} interval lines")
if not totals:
    sys.exit(1)
t = totals[0]
devs = [d for d in t["devices"] if d["name"] == disk]
check(f"device {disk} reported", len(devs) == 1, [d["name"] for d in t["devices"]])
if not devs:
    sys.exit(1)
d = devs[0]
reads = d["reqs_by_op"].get("read", 0)
# Other readers of the disk only add: the device count must cover fio's.
check("device read requests >= 95 % of fio's I/Os", issued > 100 and reads >= 0.95 * issued,
      f"observe {reads}, fio {issued}")
fio_reqs = sum(x["reqs"] for x in t["tasks"] if x["tgid"] in pids)
check("requests of fio's processes within 5 % of fio's I/Os", abs(fio_reqs - issued) <= 0.05 * issued,
      f"observe {fio_reqs}, fio {issued}")
lat = [l for l in d["latency"] if l["op"] == "read" and l["kind"] == "device"]
p50 = max((l["p50_us"] or 0) for l in lat) if lat else 0
p99 = max((l["p99_us"] or 0) for l in lat) if lat else 0
check("device read latency p50 <= p99, non-zero", lat and 0 < p50 <= p99,
      f"p50 {p50:.1f} us, p99 {p99:.1f} us")
# The device latency must agree with fio's own completion latency up to the
# log2 bucket width (fio's also covers the syscall and the block layer).
clat = fio["jobs"][0]["read"].get("clat_ns", {}).get("percentile", {}).get("50.000000", 0) / 1000
check("device read p50 within 3x of fio's clat p50", clat > 0 and clat / 3 <= p50 <= clat * 3,
      f"observe {p50:.1f} us, fio {clat:.1f} us")
tasks = t["tasks"]
top = tasks[0] if tasks else None
check("top task is fio's job", top is not None and top["tgid"] in pids and top["comm"].startswith("fio"),
      f"top {top and (top['tid'], top['comm'], top['reqs'])}, fio pids {sorted(pids)}")
busy = [i for i in intervals if any(x["name"] == disk and (x["iops"] or 0) > 0 for x in i["devices"])]
check("interval reports show IOPS", len(busy) >= 2, f"{len(busy)} intervals with IOPS > 0")
# The issue hook attaches once a request completes without the kernel's
# issue time: always when told to ignore them; on 6.5+ elsewhere only for a
# queue without block stats (this machine's may or may not have them).
issue_attached = "timing issues in BPF" in open(err).read()
if name == "kept":
    check("issue hook attached at the first request without a kernel issue time",
          issue_attached, f"observe log says so: {issue_attached}")
else:
    print(f"     {name}: issue hook attached on demand: {issue_attached}")
print(f"     {name}: IOPS fio {fio['jobs'][0]['read']['iops']:.0f}; "
      f"bpf {t['bpf']['run_cnt']} runs, {t['bpf']['ns_per_event']} ns/run; tracking {t['tracking']}")
sys.exit(0 if ok else 1)
EOF
}

run_mode tp_btf
run_mode raw_tp --raw-tp
run_mode insert --no-io-start
run_mode kept --keep-issue-times
# Every key in the hash table, as keys whose direct-mapped slot is taken.
run_mode noslots --no-io-slots
rm -f "$file"

# A reader that stops early (`| head -1`): observe must end by itself with 0,
# quietly (no panic on the broken pipe).
pipe_err=$work/observe-pipe.err
set +e
timeout 60 "$bin" observe --json --interval 1 --duration 30 2>"$pipe_err" | head -n1 >"$work/observe-pipe.out"
pipe_rc=${PIPESTATUS[0]}
set -e
if [[ $pipe_rc == 0 && -s $work/observe-pipe.out ]] && ! grep -qi 'panick' "$pipe_err"; then
	echo "PASS observe | head -1: exit 0, one line, no panic"
else
	echo "FAIL observe | head -1: exit $pipe_rc, $(wc -l <"$work/observe-pipe.out") line(s); stderr: $(head -c 300 "$pipe_err")"
	fail=1
fi
if ((fail)); then
	echo "observe host test: FAILED (outputs in $work)"
	exit 1
fi
echo "observe host test: all modes PASS"
