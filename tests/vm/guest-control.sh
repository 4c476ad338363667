#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh): the threshold controller, live. scx_esn without
# --threshold learns node 1's threshold (the NVMe's node) while 3 fio jobs
# read the disk; bpftrace counts which node submitted the bios, as referee.
# Node 1 has 2 CPUs, so its threshold is 1 to 4 (two tasks per CPU); node 0
# takes what spills.
#   L. measured penalty, crowding: this emulator has no interconnect, remote
#      I/O costs what local I/O costs (P_numa ~1.0), and once fio reads, a
#      spinner pinned to each of node 1's CPUs makes a placed job wait for a
#      CPU there beyond an uncontended wake-up (the contention the controller
#      weighs; without the spinners the jobs' waits on node 1 are wake-ups
#      onto idle CPUs, which a job on node 0 pays too, and the controller is
#      indifferent). Crowding is the greater evil: from its CPU count (2) the
#      threshold settles at 1 and the jobs spread: 1 of 3 mostly on node 1,
#      the same one throughout the judged seconds (the one-interval
#      explorations of 2 must not pass the slot between jobs).
#      Settled value and time reported.
#   S. SIGINT: exit 0, the learned state saved with node 1 at its threshold.
#   P. --numa-penalty 3.0 on the same state file, no spinners: starts from
#      the saved 1, and since remote I/O is now the greater evil and the jobs
#      mostly wait for the disk, settles at 3 or more (the third job shares a
#      CPU at far less than 3.0's cost): 3 of 3 jobs mostly on node 1, node
#      1's share of the bios at least 85 % (2 of 3 jobs at equal rates make
#      66.7 %).
#   M. during P, `scx_esn --monitor 1 --json` reads the running scheduler's
#      stats socket: exit 0 on SIGINT, node 1's control state (override 3.0),
#      and the NVMe requests it reports within 5 % of bpftrace's bio count;
#      the per-node content: node 1's 2 CPUs, its mean busy % over the run
#      within 10 points of what this script computes from /proc/stat itself,
#      spills out of node 1 and into node 0 (before the threshold reaches
#      3, jobs beyond it spill), the NVMe's
#      utilisation (> 10 %), the health block (5 s watchdog, dispatches,
#      the longest wait).
#   X. during P, the stats socket's own protocol, as scxtop's scheduler view
#      speaks it: `stats` without arguments answers an interval naming the
#      NVMe and node 1; `stats_meta` describes every field served, from
#      the top struct down (what `scx_esn --help-stats` prints).
#   R. during P, --prometheus serves /metrics: one scrape after fio, in the
#      OpenMetrics text format; the NVMe's requests_total (cumulative since
#      the scheduler started, just before fio) within 95-110 % of bpftrace's
#      bio count, its latency histogram's count equal to its +Inf bucket and
#      within 0.1 % of it (BPF counts the two apart; a scrape during I/O may
#      fall between them),
#      node 1's threshold gauge as the stats say, numa_penalty 3.0 override.
#   G. contrib/grafana/scx_esn.json: every query names metrics and labels
#      that R's live scrape serves (tests/check-dashboard.py, which also
#      proves it would notice any one of them missing).
#   T. `scx_esn top` in tmux from the start of P: node 1's row shows 3
#      placed (3/3 or 3/4 placed/threshold) once the stats do, Tab shows the NVMe with its IOPS; when P's scheduler
#      stops it shows "disconnected", once C's starts it has reconnected by
#      itself; q exits 0.
#   C. a corrupt state file: a warning, the scheduler runs, exit 0, and the
#      file is replaced by a valid one.
#   O. the state file's lock held by another process (flock): the scheduler
#      exits 1 with "in use by another scx_esn process", sched_ext disabled.
#   H. a spinner on every CPU from fio's first read, no state: the wait of
#      the job placed on node 0 (where node 1 spills) is measured and weighed,
#      spill contention > 0 in the stats; the threshold reported.
#   F. scx_esn profile --device NVME --max-jobs 2 --save (no scheduler): local
#      and remote rows with IOPS, P_numa measured near 1 (no interconnect),
#      and the state file seeded with node 1 at the printed balance point.
# Environment:
#   ESN_BIN                the binary (default $ESN_REPO/target/release/scx_esn)
#   ESN_CONTROL_RUNTIME_L  seconds of fio in L (default 45)
#   ESN_CONTROL_RUNTIME_P  seconds of fio in P (default 70)
#   ESN_CONTROL_JUDGE      last seconds of each run the jobs are judged on (15)
#   ESN_CONTROL_JOBS       fio jobs (default 3)
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

bin=${ESN_BIN:-$ESN_REPO/target/release/scx_esn}
runtime_l=${ESN_CONTROL_RUNTIME_L:-45}
runtime_p=${ESN_CONTROL_RUNTIME_P:-70}
judge=${ESN_CONTROL_JUDGE:-15}
jobs=${ESN_CONTROL_JOBS:-3}
state=$ESN_WORK/learned.json
prom_addr=127.0.0.1:9101
common_args=(--stats 1 --control-interval 1 --state-file "$state")

cleanup() {
	sched_kill
	bio_trace_stop
	for f in "$ESN_WORK"/sched-*.stderr; do
		[[ -s $f ]] || continue
		echo "----- $(basename "$f") (last 25 lines) -----"
		tail -n 25 "$f"
	done
}
finish_all() { cleanup; finish; }

# control_summary STDOUT FROM: from the scheduler's "control n1:" stats lines
# (one a second) after the first FROM of them, prints
#   FINAL SETTLED_AFTER_S SOURCE P_NUMA LINES EXPLORED
# FINAL: the learned threshold at the end (exploration taken out);
# SETTLED_AFTER_S: the line (second) from which it stayed FINAL; SOURCE and
# P_NUMA: of the last line; EXPLORED: lines that were exploring.
control_summary() {
	python3 - "$1" "$2" <<'PY'
import re, sys
pat = re.compile(r"^control n1: threshold (\d+)( \(exploring\))? placed (\d+) \| P_numa ([\d.]+) (\w+)")
rows = []
for line in open(sys.argv[1]):
    m = pat.match(line)
    if m:
        t = int(m.group(1)) - (1 if m.group(2) else 0)
        rows.append((t, bool(m.group(2)), m.group(5), m.group(4)))
rows = rows[int(sys.argv[2]):]
if not rows:
    print("- - - - 0 0")
    sys.exit()
final = rows[-1][0]
settled = len(rows)
while settled > 0 and rows[settled - 1][0] == final:
    settled -= 1
print(final, settled, rows[-1][2], rows[-1][3], len(rows), sum(r[1] for r in rows))
PY
}

control_lines() { grep -c '^control n1:' "$1" 2>/dev/null || true; }

# phase NAME RUNTIME ARGS...: scheduler up with ARGS, fio $jobs jobs for RUNTIME
# seconds measured by bpftrace (the last $judge seconds judged), then the
# controller's trace summarised. Sets P_* and the MB_* of the measurement.
phase() {
	local name=$1 runtime=$2 from
	shift 2
	P_OUT=$ESN_WORK/sched-$name.stdout
	P_ERR=$ESN_WORK/sched-$name.stderr
	if ! sched_start "$P_OUT" "$P_ERR" 60 "$bin" "$@"; then
		check "$name scx_esn loads" 0 "$SCHED_WHY"
		finish_all
	fi
	say "$name: scx_esn up after ${SCHED_TOOK}s: $*"
	from=$(control_lines "$P_OUT")
	fio_randread_args "$dev" "$jobs" "$runtime"
	MON_PID=
	if [[ ${WITH_MONITOR:-0} == 1 ]]; then
		"$bin" --monitor 1 --json >"$ESN_WORK/monitor.jsonl" 2>"$ESN_WORK/monitor.err" &
		MON_PID=$!
		top_start
		sleep 2
	fi
	local shots=
	if [[ -n $MON_PID ]]; then
		cp /proc/stat "$ESN_WORK/proc-stat.before"
		# top's screens while fio runs: nodes, then Tab to the devices. The
		# nodes screen once the stats show node 1 holding all 3 jobs (P's
		# answer; from the saved 1 it may wait for an exploration, ~20 s,
		# when L's points at 2 lie above 3.0), from a quarter of the run, at
		# the latest 10 s before its end; top redraws each second.
		(
			for ((i = 0; i < runtime - 10; i++)); do
				sleep 1
				((i >= runtime / 4)) &&
					grep '^control n1:' "$P_OUT" | tail -n1 | grep -Eq '^control n1: threshold [34] placed 3 ' &&
					break
			done
			sleep 2
			top_screen nodes
			tmux_ send-keys -t esn-top Tab
			sleep 4
			top_screen devices
		) &
		shots=$!
	fi
	MB_SKIP=$((runtime - judge)) measure_bios_during "$((runtime + 60))" -- ${FIO_WRAP:-} "${FIO[@]}"
	[[ -n $MON_PID ]] && cp /proc/stat "$ESN_WORK/proc-stat.after"
	MON_RC=-1
	if [[ -n $MON_PID ]]; then
		wait "$shots"
		# While it still runs: one scrape of --prometheus (check R).
		python3 -c 'import sys, urllib.request
r = urllib.request.urlopen(sys.argv[1], timeout=10)
sys.stdout.write(r.headers.get("Content-Type") + "\n" + r.read().decode())' \
			"http://$prom_addr/metrics" >"$ESN_WORK/metrics.txt" 2>"$ESN_WORK/metrics.err"
		# The socket's own protocol, as scxtop's scheduler view speaks it
		# (check X): `stats` with no arguments, then `stats_meta`.
		python3 - /var/run/scx/root/stats >"$ESN_WORK/socket.json" 2>"$ESN_WORK/socket.err" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
out = {}
for req in ("stats", "stats_meta"):
    f.write(json.dumps({"req": req, "args": {}}) + "\n")
    f.flush()
    out[req] = json.loads(f.readline())
json.dump(out, sys.stdout)
PY
		kill -INT "$MON_PID"
		wait "$MON_PID"
		MON_RC=$?
	fi
	tid_split fio 80
	read -r P_FINAL P_SETTLED P_SOURCE P_NUMA P_LINES P_EXPLORED < <(control_summary "$P_OUT" "$from")
	say "$name: learned threshold $P_FINAL, stable from second $P_SETTLED of $P_LINES, P_numa $P_NUMA ($P_SOURCE), $P_EXPLORED exploring"
	grep -E 'threshold [0-9]+ -> [0-9]+|from the learned state|learning from scratch|ignoring' "$P_ERR" | sed 's/^/    /'
	# Placements dropped because the threshold fell under them, per second.
	P_SHED=$(grep -o ' shed=[0-9]*' "$P_OUT" | awk -F= '{ s += $2 } END { print s + 0 }')
}

# `scx_esn top` in a tmux pane (check T), read back with capture-pane.
tmux_() { tmux -S "$ESN_WORK/tmux.sock" "$@"; }
top_start() {
	tmux_ -f /dev/null new-session -d -s esn-top -x 120 -y 40 \
		"$bin top --interval 1 2>$ESN_WORK/top.err; echo TOP-EXIT=\$?; sleep 60"
}
# top_screen NAME: the pane now, into $ESN_WORK/top-NAME.txt.
top_screen() { tmux_ capture-pane -p -t esn-top >"$ESN_WORK/top-$1.txt" 2>&1 || true; }

# stop_sched NAME: SIGINT, must exit 0 within 15 s.
stop_sched() {
	kill -INT "$sched_pid" 2>/dev/null
	if ! sched_wait_exit 15; then
		check "$1 SIGINT: exit 0" 0 "still running 15 s after SIGINT"
		finish_all
	fi
}

# saved_threshold: node 1's threshold in the state file, or "-".
saved_threshold() {
	python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print([n["threshold"] for n in s["nodes"] if n["node"] == 1][0])' "$state" 2>/dev/null || echo -
}

say "controller test on $(uname -r); bin=$bin"
dev=$(nvme_dev_on_node 1) || dev=
if [[ -z $dev || ! -b $dev ]]; then
	check "NVMe on node 1" 0 "none found: $(echo /sys/class/nvme/*)"
	finish_all
fi
[[ -x $bin ]] || { check "scx_esn binary" 0 "not found at $bin; run make first"; finish_all; }
[[ -d /sys/kernel/sched_ext ]] || { check "sched_ext in the kernel" 0 "/sys/kernel/sched_ext missing"; finish_all; }
rm -f "$state"
if ! bio_trace_start "$dev"; then
	check "bpftrace attaches" 0 "no marker within ${ESN_BT_ATTACH_TIMEOUT}s"
	finish_all
fi

# ---- L. the measured penalty: settles low, the jobs spread -------------------------
# fio_beside_spinners FIO...: fio, and from its first completed read to its end
# one spinner pinned to each of node 1's CPUs: a placed job finds no idle CPU
# there at its completions and waits, or preempts a spinner, where on node 0 it
# would find one idle. Not from fio's start: under single-threaded TCG two
# vCPUs that never idle slowed fio's start by ~40 s (2026-11-29; under EEVDF
# as much: a 2 s fio run beside them took 14-47 s either way).
# SPIN_CPUS (default "2 3") names the CPUs that get one.
fio_beside_spinners() {
	local stat=/sys/block/$(basename "$dev")/stat reads0 reads t rc cpu
	read -r reads0 _ <"$stat"
	"$@" &
	local fio_pid=$!
	for ((t = 0; t < 300; t++)); do
		read -r reads _ <"$stat"
		((reads > reads0)) && break
		sleep 0.1
	done
	echo "fio_beside_spinners: spinners on CPUs ${SPIN_CPUS:-2 3} after $((t / 10)).$((t % 10)) s"
	for cpu in ${SPIN_CPUS:-2 3}; do
		spin 0 "$cpu"
	done
	wait "$fio_pid"
	rc=$?
	spin_stop
	return "$rc"
}
FIO_WRAP=fio_beside_spinners phase L "$runtime_l" "${common_args[@]}"
l_pct1=$MB_PCT1
ok=0
[[ $MB_RC == 0 && $P_FINAL == 1 && $P_SOURCE == measured ]] && ((MB_JOBS == jobs && MB_JOBS_N1 == 1)) && ok=1
check "L measured P_numa: threshold settles at 1, jobs spread" "$ok" \
	"threshold $P_FINAL from second $P_SETTLED of $P_LINES; P_numa $P_NUMA ($P_SOURCE); $P_SHED shed; last ${judge}s: $MB_JOBS_N1 of $MB_JOBS jobs >80 % node 1, node-1 share $MB_PCT1 % of $MB_TOTAL bios; fio exit $MB_RC"

# ---- S. SIGINT saves what was learned -----------------------------------------------
stop_sched S
saved=$(saved_threshold)
ok=0
[[ $SCHED_RC == 0 && $saved == "$P_FINAL" ]] && ok=1
check "S SIGINT: exit 0, state saved" "$ok" "exit $SCHED_RC after ${SCHED_WAITED}s; saved node-1 threshold $saved"

# ---- P. --numa-penalty 3.0: from the saved state up to every job -------------------
# Node 1's share of the bios: 3 of 3 jobs there make 100 %, 2 of 3 at equal
# rates 66.7 %; at least 85 %. Not against L's share, since L's spinners
# change each job's rate (the job beside them read 45.8 % alone: a vCPU that
# never idles wakes its task sooner under TCG).
p_share_min=85
WITH_MONITOR=1 phase P "$runtime_p" "${common_args[@]}" --numa-penalty 3.0 --prometheus "$prom_addr"
restored=$(grep -c 'node 1: threshold 1 from the learned state' "$P_ERR" || true)
ok=0
[[ $MB_RC == 0 && $P_FINAL =~ ^[34]$ && $P_SOURCE == override && $restored == 1 ]] &&
	((MB_JOBS == jobs && MB_JOBS_N1 == jobs)) && pct_ge "$MB_PCT1" "$p_share_min" && ok=1
check "P --numa-penalty 3.0: from the saved 1 up to every job, all on node 1" "$ok" \
	"restored=$restored; threshold $P_FINAL from second $P_SETTLED of $P_LINES ($P_EXPLORED exploring); last ${judge}s: $MB_JOBS_N1 of $MB_JOBS jobs >80 % node 1, node-1 share $MB_PCT1 % (>= $p_share_min %; L: $l_pct1 %) of $MB_TOTAL bios; fio exit $MB_RC"
stop_sched P

# ---- M. the monitor read the stats socket during P -------------------------------------
verdict=$(python3 - "$ESN_WORK/monitor.jsonl" "$(basename "$dev")" "$MB_FULL_TOTAL" "$MON_RC" "$ESN_WORK/proc-stat" <<'PY'
import json, sys
path, disk, bios, rc, stat = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def node1_ticks(f):  # CPUs 2-3 are node 1: (busy, total), idle and iowait not busy
    busy = total = 0
    for line in open(f):
        w = line.split()
        if w[0] in ("cpu2", "cpu3"):
            v = [int(x) for x in w[1:9]]
            total += sum(v); busy += sum(v) - v[3] - v[4]
    return busy, total
(b0, t0), (b1, t1) = node1_ticks(stat + ".before"), node1_ticks(stat + ".after")
ref_busy = 100.0 * (b1 - b0) / max(1, t1 - t0)
lines = [json.loads(l) for l in open(path) if l.strip()]
reqs = sum(d["reqs"] for l in lines for d in l["io"]["devices"] if d["name"] == disk)
ctl = [c for l in lines for c in l["control"] if c["node"] == 1]
last = ctl[-1] if ctl else {}
node = lambda l, n: next((x for x in l["nodes"] if x["node"] == n), {})
# 3 jobs, node 1 keeps 1 at first (the saved threshold): the others are homed
# on node 1 and spill to 0 until the threshold reaches them.
spill_out1 = sum(node(l, 1).get("spill_out", 0) for l in lines)
spill_in0 = sum(node(l, 0).get("spill_in", 0) for l in lines)
# The intervals of the fio run (the monitor started 2 s before it).
busy1 = [node(l, 1).get("busy_pct") for l in lines[2:-1]]
busy1 = [b for b in busy1 if b is not None]
mean_busy1 = sum(busy1) / len(busy1) if busy1 else -100
util = [d.get("util_pct") for l in lines[2:] for d in l["io"]["devices"] if d["name"] == disk]
util = [u for u in util if u is not None]
health = lines[-1].get("health", {})
margins = [l.get("health", {}).get("max_wait_ns") for l in lines]
ok = (rc == "0" and len(lines) >= 5 and bios > 0 and abs(reqs - bios) <= 0.05 * bios
      and last.get("p_numa_source") == "override" and last.get("p_numa") == 3.0
      and any(n["node"] == 1 for n in lines[-1]["nodes"])
      and node(lines[-1], 1).get("cpus") == 2
      and spill_out1 >= 1 and spill_in0 >= 1
      and abs(mean_busy1 - ref_busy) <= 10 and util and max(util) > 10
      and health.get("watchdog_timeout_ms") == 5000 and health.get("dispatched", 0) > 0
      and any(m for m in margins))
mx = max((m or 0) for m in margins)
print(int(ok), f"exit {rc}; {len(lines)} intervals; {disk} requests {reqs} vs bpftrace bios {bios}; "
      f"last control n1: threshold {last.get('threshold')} p_numa {last.get('p_numa')} {last.get('p_numa_source')}; "
      f"spills n1 out {spill_out1}, n0 in {spill_in0}; n1 busy mean {mean_busy1:.1f} % "
      f"(guest /proc/stat over the fio run: {ref_busy:.1f} %); "
      f"{disk} util max {max(util or [0]):.0f} %; longest wait <= {mx / 1e6:.1f} ms of "
      f"watchdog {health.get('watchdog_timeout_ms')} ms; dispatched {health.get('dispatched')} in the last interval")
PY
)
check "M --monitor 1 --json reads the running scheduler" "${verdict%% *}" "${verdict#* }"

# ---- X. the raw socket during P: what scxtop reads, and the stats metadata -------------
verdict=$(python3 - "$ESN_WORK/socket.json" "$(basename "$dev")" <<'PY'
import json, sys
path, disk = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except Exception as e:
    print(0, f"no answer from the socket: {e}"); sys.exit()
stats, meta = r["stats"], r["stats_meta"]
top = stats["args"]["resp"] if stats.get("errno") == 0 else {}
metas = meta["args"]["resp"] if meta.get("errno") == 0 else {}
root = next((m for m in metas.values() if m.get("top")), {})
described = set(root.get("fields", {}))
devices = [d["name"] for d in top.get("io", {}).get("devices", [])]
def undescribed(name, obj):  # keys of a served object its metadata lacks
    m = metas.get(name, {}).get("fields", {})
    return sorted(set(obj) - set(m))
missing = undescribed("IntervalStats", top)
for n in top.get("nodes", []):
    missing += undescribed("NodeLoad", n)
for d in top.get("io", {}).get("devices", []):
    missing += undescribed("DeviceReport", d)
ok = (root.get("name") == "IntervalStats" and described == set(top)
      and disk in devices and any(n["node"] == 1 for n in top.get("nodes", []))
      and not missing and len(metas) >= 10)
print(int(ok), f"stats errno {stats.get('errno')}: keys {sorted(top)}, devices {devices}; "
      f"stats_meta errno {meta.get('errno')}: {len(metas)} structs, top {root.get('name')}, "
      f"served but undescribed {missing}")
PY
)
check "X the stats socket as scxtop reads it, and stats_meta" "${verdict%% *}" "${verdict#* }"

# ---- R. the Prometheus endpoint scraped during P, against bpftrace -----------------------
verdict=$(python3 - "$ESN_WORK/metrics.txt" "$(basename "$dev")" "$MB_FULL_TOTAL" "$P_FINAL" <<'PY'
import re, sys
path, disk, bios, final = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(path).read()
ctype, _, body = text.partition("\n")
samples = {}
for line in body.splitlines():
    if line and not line.startswith("#"):
        series, value = line.rsplit(" ", 1)
        samples[series] = float(value)
def total(prefix, **want):
    out = 0.0
    for series, v in samples.items():
        name, _, labels = series.partition("{")
        lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if name == prefix and all(lab.get(k) == w for k, w in want.items()):
            out += v
    return out
reqs = total("scx_esn_io_requests_total", device=disk)
hist = total("scx_esn_io_device_latency_seconds_count", device=disk)
inf = total("scx_esn_io_device_latency_seconds_bucket", device=disk, le="+Inf")
thr = total("scx_esn_node_threshold", node="1")
pen = total("scx_esn_numa_penalty", node="1", source="override")
# Cumulative since the scheduler started, which is before fio: at least
# what bpftrace saw during the measurement, and not much more.
ok = (ctype.startswith("application/openmetrics-text") and body.endswith("# EOF\n")
      and bios > 0 and 0.95 * bios <= reqs <= 1.10 * bios and inf == hist
      and abs(hist - reqs) <= max(5, 0.001 * reqs)
      and str(int(thr)) == final and pen == 3.0)
print(int(ok), f"{ctype.split(';')[0]}; {len(samples)} samples; {disk} requests_total {reqs:.0f} "
      f"(histogram count {hist:.0f}, +Inf {inf:.0f}) vs bpftrace bios {bios}; "
      f"node_threshold n1 {thr:.0f} (stats: {final}); numa_penalty n1 {pen}")
PY
)
check "R --prometheus: /metrics agrees with bpftrace and the controller" "${verdict%% *}" "${verdict#* }"
# The dashboard shipped for it asks only for what that live scrape serves.
rc=0
out=$(python3 "$ESN_REPO/tests/check-dashboard.py" "$ESN_REPO/contrib/grafana/scx_esn.json" \
	"$ESN_WORK/metrics.txt" 2>&1) || rc=$?
check "G the Grafana dashboard's queries name served metrics and labels" \
	"$([[ $rc == 0 ]] && echo 1 || echo 0)" "$(tail -n 4 <<<"$out" | tr '\n' ' ')"
sleep 3
top_screen gone

# ---- C. a corrupt state file is ignored with a warning, then replaced -------------------
printf '{"version": 1, "topology": tru' >"$state"
if ! sched_start "$ESN_WORK/sched-C.stdout" "$ESN_WORK/sched-C.stderr" 60 "$bin" "${common_args[@]}"; then
	check "C corrupt state file: runs anyway" 0 "$SCHED_WHY"
	finish_all
fi
sleep 3
# top reconnects to the new scheduler by itself.
sleep 3
top_screen back
tmux_ send-keys -t esn-top q
sleep 3
top_screen quit
tmux_ kill-server 2>/dev/null
verdict=$(python3 - "$ESN_WORK" "$(basename "$dev")" <<'PY'
import re, sys
work, disk = sys.argv[1], sys.argv[2]
scr = {n: open(f"{work}/top-{n}.txt").read() for n in ("nodes", "devices", "gone", "back", "quit")}
def row(text, first):  # the table row that starts with FIRST
    return next((l for l in text.splitlines() if re.match(rf"\W*{first}\s", l)), "")
n1, dev = row(scr["nodes"], "1"), row(scr["devices"], disk)
iops = re.match(rf"\W*{disk}\s+1\s+([0-9.]+k?)", dev)
ok = ("Nodes" in scr["nodes"] and n1 and re.search(r"\b3/[34]\b", n1) and iops and iops.group(1) not in ("0", "-")
      and "disconnected" in scr["gone"] and "disconnected" not in scr["back"]
      and "scx_esn top" in scr["back"] and "TOP-EXIT=0" in scr["quit"])
print(int(ok), f"node 1 row: {' '.join(n1.split())[:70]!r}; {disk} row: {' '.join(dev.split())[:60]!r}; "
      f"after the scheduler stopped: {'disconnected' in scr['gone']}; reconnected to the next one: "
      f"{'disconnected' not in scr['back']}; q: {'TOP-EXIT=0' in scr['quit']}")
PY
)
check "T scx_esn top in tmux: live nodes and devices, survives a restart, q exits 0" "${verdict%% *}" "${verdict#* }"
stop_sched C
warned=$(grep -m1 'ignoring the learned state' "$ESN_WORK/sched-C.stderr" || true)
saved=$(saved_threshold)
ok=0
[[ $SCHED_RC == 0 && -n $warned && $saved != - ]] && ok=1
check "C corrupt state file: warning, runs, replaced" "$ok" "exit $SCHED_RC; ${warned:-no warning}; saved threshold now $saved"

# ---- O. another process owns the state file: refused, nothing left loaded -------------
# flock(1) stands in for a second scx_esn (profile --save) holding the file.
flock "$(dirname "$state")/.$(basename "$state").lock" sleep 20 &
holder=$!
sleep 1
owned_rc=0
timeout 60 "$bin" "${common_args[@]}" >"$ESN_WORK/sched-O.stdout" 2>"$ESN_WORK/sched-O.stderr" || owned_rc=$?
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
owned_state=$(cat /sys/kernel/sched_ext/state 2>/dev/null || echo ?)
refused=$(grep -m1 'in use by another scx_esn process' "$ESN_WORK/sched-O.stderr" || true)
ok=0
[[ $owned_rc == 1 && -n $refused && $owned_state == disabled ]] && ok=1
check "O state file owned elsewhere: exit 1, says so, nothing loaded" "$ok" \
	"exit $owned_rc; sched_ext $owned_state; ${refused:-no message}"

# ---- H. a CPU hog on every node: the spill's wait is weighed -------------------------
# As L, but a spinner on each of the 4 CPUs: a job spilled to node 0 waits for a
# CPU there too. Learning from scratch (no state), the wait of the job placed on
# node 0 must be measured (the stats' "+ spill X" with X > 0; it stays 0.00 when
# nothing was placed on the node spilled to) and weighed: a move is checked
# against the rule with the spill in it, redone from the interval lines.
# Which side wins is not checked: the placed jobs preempt the spinners on
# either node, so P_cont(2) and P_numa + spill tie (P_cont(2) 1.07-1.16 against
# a shed line of (1.04 + 0.04) x 1.05 = 1.13 on 2026-12-07, and after the shed
# P_cont(1) 1.01-1.11 with the two spilled jobs' wait at 0.07-0.08: either
# answer costs the same to within the noise). The check asked for "stays 2"
# until then, and failed CI on 2026-12-02 and 2026-12-06 on sheds the rule
# justified by 0.1-1 %. What it still catches: a spill never measured, a shed
# before the spill's warm-up (1/alpha = 5 measured intervals), a move the rule
# with the spill does not justify (before the spill term: 2 -> 1 on P_cont(2)
# 1.08 against P_numa 1.01 alone), and flapping (2 -> 1 -> 2 -> 1 before the tie
# margin).
hogs() { SPIN_CPUS="0 1 2 3" fio_beside_spinners "$@"; }
FIO_WRAP=hogs phase H "$runtime_l" --stats 1 --control-interval 1 --no-state
h_spill=$(sed -n 's/^control n1: .* + spill \([0-9.]*\),.*/\1/p' "$P_OUT" | tail -n1)
h_moves=$(grep -c 'threshold [0-9]* -> [0-9]*' "$P_ERR" || true)
stop_sched H
# Each move of the learned threshold, redone: the evidence rule (evidence.rs)
# on the medians of the last 3 fresh P_cont at the n it judges, against
# P_numa + spill of the move's own line, with 0.01 for the lines' rounding.
h_rule=$(python3 - "$P_OUT" <<'PY'
import re, statistics, sys
pat = re.compile(r"^control n1: threshold (\d+)( \(exploring\))? placed (\d+) \| P_numa ([\d.]+) \w+ "
                 r"\+ spill ([\d.]+), P_cont ([\d.]+|-) at n=\d+, curve \S+, n\* (\S+)")
points, last, clock, prev, spill_since, verdicts = {}, {}, 0, None, None, []
for line in open(sys.argv[1]):
    m = pat.match(line)
    if not m:
        continue
    t = int(m.group(1)) - (1 if m.group(2) else 0)
    n, p_numa, spill, p_cont, n_star = int(m.group(3)), float(m.group(4)), float(m.group(5)), m.group(6), m.group(7)
    if spill > 0 and spill_since is None:
        spill_since = clock
    if p_cont != "-" and n > 0:
        clock += 1
        if clock - last.get(n, clock) - 1 > 6:  # STALE_AFTER: the older points no longer steer
            points[n] = []
        points[n] = (points.get(n, []) + [float(p_cont)])[-3:]
        last[n] = clock
    if prev is not None and t != prev:
        line_at = p_numa + spill
        judged = prev if t < prev else prev + 1
        med = statistics.median(points.get(judged, [0]))
        if n_star != "-":
            ok, why = True, f"n* {n_star} (the fit's)"
        elif t < prev:
            warmed = spill_since is not None and clock - spill_since >= 5
            ok = spill > 0 and warmed and med > line_at * 1.05 - 0.01
            why = f"P_cont({judged}) {med:.2f} > ({p_numa:.2f} + spill {spill:.2f}) x 1.05 = {line_at * 1.05:.2f}, warmed {warmed}"
        else:
            ok = med <= line_at * 0.95 + 0.01
            why = f"P_cont({judged}) {med:.2f} <= ({p_numa:.2f} + spill {spill:.2f}) x 0.95 = {line_at * 0.95:.2f}"
        verdicts.append((ok, f"{prev} -> {t}: {why}"))
    prev = t
print(int(all(ok for ok, _ in verdicts)), "; ".join(w for _, w in verdicts) or "no move")
PY
)
ok=0
[[ $MB_RC == 0 && ${h_rule%% *} == 1 && ${h_moves:-0} -le 1 ]] &&
	awk -v s="${h_spill:-0}" 'BEGIN { exit !(s > 0) }' && ok=1
check "H a hog on every node: the spill measured and weighed, at most one move" "$ok" \
	"P_numa $P_NUMA ($P_SOURCE) + spill ${h_spill:-never measured}; ${h_rule#* }; threshold $P_FINAL from second $P_SETTLED of $P_LINES, $h_moves moves, $P_SHED shed; last ${judge}s: $MB_JOBS_N1 of $MB_JOBS jobs >80 % node 1, node-1 share $MB_PCT1 % of $MB_TOTAL bios; fio exit $MB_RC"

# ---- F. the profile sweep, saved as the starting point -----------------------------------
bio_trace_stop
profiled=$ESN_WORK/profiled.json
prof_rc=0
timeout -k 5 300 "$bin" profile --device "$(basename "$dev")" --max-jobs 2 --runtime 3 \
	--save --state-file "$profiled" >"$ESN_WORK/profile.out" 2>"$ESN_WORK/profile.err" || prof_rc=$?
sed 's/^/    /' "$ESN_WORK/profile.out" "$ESN_WORK/profile.err"
verdict=$(python3 - "$ESN_WORK/profile.out" "$profiled" "$prof_rc" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
num = r"\s+([\d.]+)"
rows = re.findall(r"^\s+(\d+)" + num * 6 + "$", text, re.M)
summary = re.search(r"^P_numa ([\d.]+) \((\w+)[^)]*\); balance point n\* = (\d+)", text, re.M)
ok = (sys.argv[3] == "0" and [r[0] for r in rows] == ["1", "2"]
      and all(float(r[1]) > 0 and float(r[3]) > 0 for r in rows)
      and summary is not None and summary.group(2) == "measured"
      and 1.0 <= float(summary.group(1)) <= 1.5)
saved = "-"
try:
    saved = [n for n in json.load(open(sys.argv[2]))["nodes"] if n["node"] == 1][0]["threshold"]
except Exception:
    ok = False
ok = ok and summary is not None and saved == int(summary.group(3))
print(int(ok), f"exit {sys.argv[3]}; rows (jobs, local IOPS, us, remote IOPS, us, P_cont, rem/loc) {rows}; "
      f"{summary.group(0) if summary else 'no summary'}; saved node-1 threshold {saved}")
PY
)
check "F profile: local and remote rows, P_numa measured, saved" "${verdict%% *}" "${verdict#* }"

finish_all
