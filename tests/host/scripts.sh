#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# The bpftrace scripts of scripts/ on the host kernel, for real, with every
# bpftrace at hand: Debian 12's 0.17 and the current ones that
# tests/fetch-bpftrace.sh unpacks (trixie, sid). For each bpftrace, all five
# scripts run at once (through scripts/bt-run.sh, as an operator would) while
# fio does direct 4k random reads on a file of the disk under the build tree,
# pinned to one CPU and moved to another halfway. Then, against fio's own
# figures and sysfs:
#   - nvme-locality: the disk's bios from the CPUs' node >= 95 % of fio's
#     I/Os, its node (DEV_NODE) and locality as sysfs says (-1: nonode);
#   - blk-lat-node: as many requests, a histogram, a mean device latency
#     no higher than fio's completion latency (x1.5);
#   - iowait-runq: fio's I/O wake-ups 75-102 % of fio's own context
#     switches (no more than its I/Os), histogram present;
#   - io-task-migrations: fio's forced move seen with the right node pair;
#   - esn-decisions: refused with a clear message where the kernel has no
#     sched_ext (it runs for real in tests/vm/guest-scripts.sh);
#   - a script that bpftrace cannot run here must be refused by bt-run.sh
#     with its reason (exit 3), never fail inside bpftrace or print nothing.
# Static checks first: the header sections, the 0.17 variants printing the
# same maps as the main scripts, esn-decisions.bt's layout and DSQ constants
# against bpf/intf.h.
#
# Usage: tests/host/scripts.sh [SECONDS]   (root; needs fio, python3, a C compiler)
# Environment: ESN_BT_SUITES (default "trixie sid"; empty: system bpftrace
# only), ESN_BT_ALLOW_MISSING=1 turns a failed download of a current bpftrace
# into a loud skip instead of a failure.
set -uo pipefail

source "$(dirname "$0")/lib.sh"
host_init scripts fio python3 bpftrace
runtime=${1:-6}
work=$work/scripts
rm -rf "$work"
mkdir -p "$work"
(($(nproc) >= 2)) || die "needs 2 CPUs (fio is moved from one to the other)"
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || die "cannot mount tracefs"


# ------------------------------------------------------------ static checks --
python3 - "$repo" <<'EOF' || fail=$((fail + 1))
import re, subprocess, sys, os
repo = sys.argv[1]
ok = True
def check(what, cond, fig):
    global ok
    print(f"{'PASS' if cond else 'FAIL'} static: {what}: {fig}")
    ok = ok and cond
names = ["nvme-locality", "blk-lat-node", "io-task-migrations", "iowait-runq", "esn-decisions"]
def printed(path):
    s = open(path).read()
    return re.findall(r"print\((@\w+)", s[s.index("\nEND"):])
for n in names:
    s = open(f"{repo}/scripts/{n}.bt").read()
    missing = [h for h in ("What it shows", "How to run it", "How to read the output", "Requirements")
               if h not in s]
    check(f"{n}.bt header", not missing, "missing " + ", ".join(missing) if missing else "all sections")
    v = f"{repo}/scripts/bpftrace-0.17/{n}.bt"
    if os.path.exists(v):
        a, b = printed(f"{repo}/scripts/{n}.bt"), printed(v)
        check(f"bpftrace-0.17/{n}.bt prints the maps of {n}.bt", a == b, f"{a} vs {b}")
# esn-decisions.bt reads struct esn_placement by offset and knows the DSQ ids.
src = r'''
#include <stdio.h>
#include <stddef.h>
#include "intf.h"
int main(void) {
	printf("%zu %zu %llu %llu %d\n", offsetof(struct esn_placement, node),
	       offsetof(struct esn_placement, home_node), ESN_DSQ_IO_BASE, ESN_DSQ_FAIR_BASE,
	       (int)ESN_MAX_NODES);
	return 0;
}
'''
exe = f"{repo}/build/host-test/scripts/intf-offsets"
import shutil
cc = next((c for c in ("cc", "clang-19", "clang") if shutil.which(c)), "cc")
r = subprocess.run([cc, "-x", "c", "-I", f"{repo}/bpf", "-o", exe, "-"], input=src, text=True,
                   capture_output=True)
got = subprocess.run([exe], capture_output=True, text=True).stdout.split() if r.returncode == 0 else []
bt = open(f"{repo}/scripts/esn-decisions.bt").read()
want = ["12", "13", str(0x1000), str(0x2000), "64"]
used = all(x in bt for x in ("arg2 + 12", "arg2 + 13", "0x1000", "0x2000", "0x1040", "0x2040"))
check("esn-decisions.bt matches bpf/intf.h", got == want and used,
      f"intf.h: node@{got[0] if got else '?'} home_node@{got[1] if got else '?'} "
      f"io 0x{int(got[2]):x} fair 0x{int(got[3]):x} nodes {got[4]}" if got else r.stderr.strip())
sys.exit(0 if ok else 1)
EOF

# ---------------------------------------------------------------- bpftraces --
bts=("$(command -v bpftrace)")
read -r -a suites <<<"${ESN_BT_SUITES-trixie sid}"
if ((${#suites[@]})); then
	while read -r suite ver path; do
		if [[ $ver == - ]]; then
			if [[ ${ESN_BT_ALLOW_MISSING:-0} == 1 ]]; then
				echo "SKIPPED: no bpftrace from Debian $suite ($path); the raw-tracepoint scripts are not tested with it"
			else
				check "bpftrace from Debian $suite" 0 "$path"
			fi
			continue
		fi
		bts+=("$path")
	done < <("$repo/tests/fetch-bpftrace.sh" "${suites[@]}")
fi

# ------------------------------------------------------------- the workload --
host_disk
# The disk's NUMA node as sysfs tells it: the first numa_node file on the way
# up from the disk's device (the scripts read the same from kernel structs).
dev_node=-1
d=$(readlink -f "/sys/block/$disk/device" 2>/dev/null)
while [[ -n $d && $d != /sys/devices && $d != / ]]; do
	if [[ -r $d/numa_node ]]; then
		dev_node=$(cat "$d/numa_node")
		break
	fi
	d=$(dirname "$d")
done
cpu_node() { # CPU -> its node
	local n
	for n in /sys/devices/system/cpu/cpu"$1"/node*; do
		[[ -e $n ]] && { echo "${n##*node}"; return; }
	done
	echo -1
}
cpu_a=0 cpu_b=1
node_a=$(cpu_node $cpu_a) node_b=$(cpu_node $cpu_b)
sched_ext=0
[[ -d /sys/kernel/sched_ext ]] && sched_ext=1
kprobes=0
[[ -e /sys/kernel/tracing/kprobe_events || -d /sys/bus/event_source/devices/kprobe ]] && kprobes=1
echo "scripts host test: $(uname -r); fio on $work ($disk, NUMA node $dev_node); CPU $cpu_a (node $node_a) -> CPU $cpu_b (node $node_b); kprobes $kprobes, sched_ext $sched_ext"
file=$work/fio.dat
fio --name=layout --filename="$file" --size=128M --rw=write --bs=1M --direct=1 --output=/dev/null ||
	die "cannot lay out $file"

names=(nvme-locality blk-lat-node io-task-migrations iowait-runq esn-decisions)

# The marker bpftrace prints once every probe is attached (stdout in current
# versions, stderr in 0.17): both go to one file. Uses run_version's locals.
start_script() { # INDEX
	__BPFTRACE_NOTIFY_PROBES_ATTACHED=1 BPFTRACE=$bt \
		"$repo/scripts/bt-run.sh" "${names[$1]}" -B line >"$out/${names[$1]}.out" 2>&1 &
	pids[$1]=$!
}

wait_attached() { # INDEX
	until grep -q __BPFTRACE_NOTIFY_PROBES_ATTACHED "$out/${names[$1]}.out" ||
		! kill -0 "${pids[$1]}" 2>/dev/null || ((SECONDS - t0 > 120)); do
		sleep 0.5
	done
}

# Wait up to LIMIT s for a script to exit after its SIGINT. bpftrace 0.17
# loses a SIGINT that arrives outside its epoll_wait() (see
# tests/vm/guest-scripts.sh, bt_stop): while its output has not grown past
# SIZE, the signal goes again every 10 s, three times at most.
stop_wait() { # INDEX SIZE LIMIT
	local t0=$SECONDS resent=0
	while kill -0 "${pids[$1]}" 2>/dev/null && ((SECONDS - t0 < $3)); do
		sleep 0.5
		if ((SECONDS - t0 >= 10 * (resent + 1) && resent < 3)) &&
			[[ $(stat -c %s "$out/${names[$1]}.out") == "$2" ]]; then
			resent=$((resent + 1))
			echo "    ${names[$1]}: no report after SIGINT; SIGINT again ($resent)"
			kill -INT "${pids[$1]}" 2>/dev/null
		fi
	done
}

run_version() { # BPFTRACE
	local bt=$1 ver out pids=() i t0 late=
	ver=$("$bt" --version | awk '{ print $2 }')
	out=$work/$ver
	mkdir -p "$out"
	echo "--- bpftrace $ver ($bt)"
	# blk-lat-node counts every request on the disk from its attach on, and
	# a bpftrace starting up pages itself in from that disk: ~1,400 reads of
	# ~12 ms each from a cold cache, which once put its mean at 10x fio's.
	# So it starts once the others are up, after a sync (the writeback of
	# what earlier tests wrote is slow I/O on the same disk too), and it ends
	# before them (their exits page bpftrace in again).
	t0=$SECONDS
	for i in "${!names[@]}"; do
		if [[ ${names[$i]} == blk-lat-node ]]; then late=$i; else start_script "$i"; fi
	done
	for i in "${!names[@]}"; do
		[[ $i == "$late" ]] || wait_attached "$i"
	done
	sync
	start_script "$late"
	wait_attached "$late"
	echo "    attached after $((SECONDS - t0)) s"
	taskset -c "$cpu_a" fio --name=bt-scripts --filename="$file" --size=128M --direct=1 \
		--rw=randread --bs=4k --ioengine=psync --numjobs=1 --time_based \
		--runtime="$runtime" --output-format=json --output="$out/fio.json" &
	local fio_pid=$! job
	sleep $((runtime / 2))
	# fio forks its job: move it (all threads) to the other CPU.
	for job in $(pgrep -P "$fio_pid"); do
		taskset -a -p -c "$cpu_b" "$job" >/dev/null
	done
	wait "$fio_pid"
	sleep 1
	local sizes=() rcs=()
	sizes[$late]=$(stat -c %s "$out/${names[$late]}.out")
	kill -INT "${pids[$late]}" 2>/dev/null
	stop_wait "$late" "${sizes[$late]}" 15
	for i in "${!names[@]}"; do
		sizes[$i]=$(stat -c %s "$out/${names[$i]}.out")
		kill -INT "${pids[$i]}" 2>/dev/null
	done
	for i in "${!names[@]}"; do
		stop_wait "$i" "${sizes[$i]}" 60
		kill -KILL "${pids[$i]}" 2>/dev/null
		wait "${pids[$i]}"
		rcs+=("$?")
	done
	python3 - "$repo" "$out" "$ver" "$disk" "$dev_node" "$node_a" "$node_b" "$kprobes" "$sched_ext" \
		"${rcs[@]}" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[1] + "/tests")
from btmaps import parse, hist_count, hist_median, hist_mean
repo, out, ver, disk = sys.argv[1:5]
dev_node, node_a, node_b, kprobes, sched_ext = (int(x) for x in sys.argv[5:10])
names = ["nvme-locality", "blk-lat-node", "io-task-migrations", "iowait-runq", "esn-decisions"]
rcs = dict(zip(names, (int(x) for x in sys.argv[10:])))
fio_job = json.load(open(f"{out}/fio.json"))["jobs"][0]
fio = fio_job["read"]
ios = fio["total_ios"]
fio_ctx = fio_job["ctx"]  # the job's context switches, from its own getrusage
clat_us = fio["clat_ns"]["mean"] / 1000
old = ver.startswith("v0.17.")
want_loc = "nonode" if dev_node < 0 else None  # else per submitting node
nodes = {node_a, node_b}
lines = []

def check(name, cond, fig):
    lines.append((name, bool(cond), fig))

def text(n):
    return open(f"{out}/{n}.out", errors="replace").read()

def refused(n, why):
    t = text(n)
    check(f"{n}: refused by bt-run.sh, with the reason", rcs[n] == 3 and why in t,
          f"exit {rcs[n]}: {t.strip().splitlines()[-1] if t.strip() else 'no output'}")

def ran(n):
    t = text(n)
    errors = [l for l in t.splitlines() if "ERROR" in l and "RLIMIT_MEMLOCK" not in l]
    good = rcs[n] == 0 and "__BPFTRACE_NOTIFY_PROBES_ATTACHED" in t and not errors
    check(f"{n}: attached, exit 0 on SIGINT", good,
          f"exit {rcs[n]}" + (f", {errors[0]}" if errors else ""))
    return parse(t) if good else None

def loc(node):
    return want_loc or ("local" if node == dev_node else "remote")

# nvme-locality, blk-lat-node: raw tracepoints, or kprobes with bpftrace 0.17.
for n in ("nvme-locality", "blk-lat-node"):
    if old and not kprobes:
        refused(n, "needs kprobes")
        continue
    m = ran(n)
    if m is None:
        continue
    if n == "nvme-locality":
        bios = m.get("bios", {})
        mine = {k: v for k, v in bios.items() if k[0] == disk}
        right = sum(v for k, v in mine.items() if k[1] == dev_node and k[2] in nodes and k[3] == loc(k[2]))
        check(f"{n}: {disk} bios from node(s) {sorted(nodes)} as DEV_NODE {dev_node} {loc(node_a)}",
              right >= 0.95 * ios and ios > 1000, f"{right} bios (fio {ios} I/Os); keys {sorted(mine)}")
        b = sum(v for k, v in m.get("bytes", {}).items() if k[0] == disk and k[3] == loc(k[2]))
        check(f"{n}: bytes", b >= 0.95 * ios * 4096, f"{b} bytes")
        if dev_node < 0:
            check(f"{n}: no remote share for a device without a node",
                  disk not in {k[0] for k in m.get("remote_pct", {})}, str(m.get("remote_pct")))
    else:
        reqs = m.get("reqs", {})
        mine = {k: v for k, v in reqs.items() if k[0] == disk}
        right = sum(v for k, v in mine.items() if k[1] == dev_node and k[2] in nodes and k[3] == loc(k[2]))
        check(f"{n}: {disk} requests from node(s) {sorted(nodes)}", right >= 0.95 * ios,
              f"{right} requests (fio {ios} I/Os); keys {sorted(mine)}")
        h = m.get("usecs", {}).get((disk, loc(node_a)), {})
        avg = m.get("avg_usecs", {}).get((disk, loc(node_a)), 0)
        # The median against fio's, the mean against the histogram's own: the
        # script counts every request on the disk, and a CI machine's other
        # I/O (page-ins, writeback: ~12 ms each) has put the mean at 2-10x
        # fio's while the bulk of the histogram sat at fio's latency.
        med = hist_median(h)
        est = hist_mean(h)
        check(f"{n}: latency histogram and mean",
              hist_count(h) >= 0.95 * ios and med is not None
              and med[0] <= 2 * clat_us and (med[1] or med[0]) >= clat_us / 2
              and est and 0.5 * est <= avg <= 2 * est,
              f"{hist_count(h)} in the histogram, median bucket {med}, mean {avg} us "
              f"(histogram's own ~{est:.0f}; fio completion latency {clat_us:.1f} us)")

m = ran("iowait-runq")
if m is not None:
    w = sum(v for k, v in m.get("iowait_wakeups", {}).items() if k[0] in nodes)
    h = sum(hist_count(v) for k, v in m.get("iowait_runq_usecs", {}).items() if k[0] in nodes)
    f = sum(v for k, v in m.get("iowait_tasks", {}).items() if k[0] == "fio" and k[1] in nodes)
    # At most one sleep per psync read, but a read whose completion comes
    # before fio has gone to sleep wakes nobody: on a fast disk that was 3 of
    # 4 reads (26 % of them woke fio in one CI run, 74 % in the run before).
    # Every sleep is a context switch, which fio counts itself: the wake-ups
    # are held to that (98-99.6 % of it in those runs; preemptions add
    # switches without a wake-up, so not all). Other tasks' waits only add to
    # the node totals. The count, the histogram and the per-task count are
    # bumped by the same probe but read one after the other at exit, while
    # wake-ups still fire: they may differ by the few in between (65098
    # against 65097 in one CI run), never more.
    slack = 2 + w // 10000
    check("iowait-runq: fio's I/O wake-ups on the CPUs' node(s) ~ fio's context switches",
          0.75 * fio_ctx <= f <= min(1.02 * fio_ctx, 1.02 * ios) + 50
          and w + slack >= f and abs(h - w) <= slack,
          f"fio {f}, all {w} wake-ups, {h} in the histograms (fio {fio_ctx} context switches, "
          f"{ios} I/Os); "
          f"avg {m.get('iowait_avg_usecs')} us, others {m.get('other_avg_usecs')} us")

m = ran("io-task-migrations")
if m is not None:
    mig = m.get("migrations", {}).get(("fio", node_a, node_b), 0)
    cross = {k: v for k, v in m.get("cross_node", {}).items() if k[0] == "fio"}
    want_cross = node_a != node_b
    check("io-task-migrations: fio's move seen", mig >= 1,
          f"@migrations[fio, {node_a}, {node_b}] = {mig}; all fio: "
          f"{ {k: v for k, v in m.get('migrations', {}).items() if k[0] == 'fio'} }")
    check("io-task-migrations: cross-node only if the CPUs' nodes differ",
          bool(cross) == want_cross, f"cross-node for fio: {cross}")

if sched_ext:
    check("esn-decisions: not run on a host with sched_ext (see the VM test)", True, "skipped")
else:
    refused("esn-decisions", "no sched_ext")

for name, good, fig in lines:
    print(f"{'PASS' if good else 'FAIL'} {ver} {name}: {fig}")
sys.exit(0 if all(g for _, g, _ in lines) else 1)
EOF
	local rc=$?
	if ((rc == 0)); then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}

for bt in "${bts[@]}"; do
	run_version "$bt"
done
rm -f "$file"
echo "scripts host test: bpftrace $(for b in "${bts[@]}"; do "$b" --version | awk '{ printf "%s ", $2 }'; done)"
((fail)) && echo "scripts host test: outputs in ${work#"$repo"/}"
host_result
