#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The NUMA benchmark, inside the VM (started by guest-bench.sh).

Every scheduler on the same loads, in one boot, interleaved:

    for penalty in PENALTIES:            lab off, or tests/lab/remote-penalty --factor F
      for rep in 1..REPEATS:
        for load in LOADS:
          for sched in SCHEDULERS (rotated by rep, so none is always first):
            load sched (none for EEVDF) -> run the load -> unload -> one "point" line

A point's figures come from outside the scheduler: fio's JSON (IOPS, p50/p99
completion latency), a bpftrace referee counting every bio by the node that
submitted it (tests/bench/bio-dev-node.bt), the guest's /proc/stat (CPU time per
I/O, busy time of nodes without a device), stress-ng, hackbench and cyclictest.
Only the threshold scx_esn learned comes from scx_esn itself (its --stats lines).
The window of every figure is the same: from the end of fio's ramp to its end
(the wake-up probe, BENCH_WAKE_PROBE, is started when the ramp ends; before
2026-11-26 it ran from fio's start, ramp included).

Writes RAW (JSON lines: one "meta", a "lab" line per penalty block, one
"point" per measurement, "end" when done) for tests/bench/report.py. Never
stops at a failed point: it is recorded with its error and the run goes on.

Resumable: under TCG, each scheduler load or unload flips static keys, and
about one flip in a hundred kills the guest (the "Oops: int3" text-poke race
of tests/vm/README.md). A boot appends to RAW and skips every point already
in it, so numa-bench.sh boots again until the "end" line is written; the
interleaved order is kept, and the lab is calibrated again in the new boot.

Environment (set by numa-bench.sh): BENCH_RAW (output), BENCH_MODE
(full|quick|smoke), BENCH_PENALTIES, BENCH_REPEATS, BENCH_LOADS,
BENCH_SCHEDULERS, BENCH_RUNTIME, BENCH_RAMP, ESN_REPO.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

from bpfcost import IntervalSampler, cost_delta, prog_costs

REPO = os.environ["ESN_REPO"]
WORK = os.environ.get("ESN_WORK", "/tmp/esn-work")
ESN = os.path.join(REPO, "target/release/scx_esn")
LAB = os.path.join(REPO, "tests/lab/remote-penalty")
PEERS = os.path.join(REPO, "build/peers/bin")
FLOOR = os.path.join(REPO, "target/release/esn-scx-floor")
BT_SCRIPT = os.path.join(REPO, "tests/bench/bio-dev-node.bt")
# Time every BPF program run (kernel.bpf_stats_enabled) to report what each
# scheduler's programs cost. The timing itself costs: the BPF schedulers pay
# it at every callback, EEVDF and the floor only in the referee's and the
# lab's programs (about a tenth of scx_esn's IOPS at 4 jobs in the 2-node
# VM), so IOPS and latency verdicts want BENCH_BPF_STATS=0.
BPF_STATS = os.environ.get("BENCH_BPF_STATS", "1") != "0"
# With BPF stats on, the scheduler's programs are also sampled this often
# (ms; 0: not): the median over the intervals of ns per run ("bpf_median"),
# which a vCPU switch inside a few runs does not move (bpfcost.IntervalSampler).
BPF_SAMPLE_MS = int(os.environ.get("BENCH_BPF_SAMPLE_MS") or 100)
# Beside every I/O load, one fair task that wakes every 2 ms (cyclictest):
# how long a task that is neither placed nor I/O-bound waits for a CPU while
# the scheduler places the I/O jobs. Off by default: it takes a little CPU.
WAKE_PROBE = os.environ.get("BENCH_WAKE_PROBE", "0") != "0"
# A hog beside fio may outlast fio's run by this much before the point fails;
# it is stopped as soon as fio ends (run_point).
HOG_OUTLAST_S = 120
# The probe's histogram bound, µs: a wake-up later than this counts as this.
PROBE_HIST_US = 20000
# Which tasks keep the nodes without a device busy: the referee also sums
# on-CPU time per (node, task name) at every context switch. Off by default:
# it puts a probe on every switch, under every scheduler alike.
NODE_TASKS = os.environ.get("BENCH_NODE_TASKS", "0") != "0"
# The referee's extra probe for NODE_TASKS. The time from a CPU's last
# switch to this one belongs to the task switched out ("swapper/N": idle).
NODE_TASKS_BT = """
tracepoint:sched:sched_switch
{
	if (@esn_sw_at[cpu]) {
		@ontime[numaid, args->prev_comm] = sum(nsecs - @esn_sw_at[cpu]);
	}
	@esn_sw_at[cpu] = nsecs;
}
"""
# Per-CPU kernel threads differ only by their CPU: one row each.
PER_CPU_KTHREAD = re.compile(r"^(kworker|ksoftirqd|migration|cpuhp|rcu_\w+|idle_inject)/.*")


def log(msg):
    up = float(open("/proc/uptime").read().split()[0])
    print(f"[{up:7.1f}] {msg}", flush=True)


def env_list(name, default):
    return os.environ.get(name, default).split()


# ------------------------------------------------------------------ topology --
def read_topology():
    nodes = []
    base = "/sys/devices/system/node"
    for entry in sorted(os.listdir(base)):
        m = re.fullmatch(r"node(\d+)", entry)
        if not m:
            continue
        cpus = []
        for part in open(f"{base}/{entry}/cpulist").read().strip().split(","):
            if part:
                lo, _, hi = part.partition("-")
                cpus += range(int(lo), int(hi or lo) + 1)
        nodes.append({"id": int(m.group(1)), "cpus": cpus})
    nodes.sort(key=lambda n: n["id"])
    devices = []
    for ctrl in sorted(os.listdir("/sys/class/nvme")):
        node = int(open(f"/sys/class/nvme/{ctrl}/device/numa_node").read())
        for ns in sorted(os.listdir(f"/sys/class/nvme/{ctrl}")):
            if re.fullmatch(r"nvme\d+n\d+", ns):
                major, minor = open(f"/sys/block/{ns}/dev").read().strip().split(":")
                devices.append({"name": ns, "node": node,
                                "devt": (int(major) << 20) | int(minor)})
    return nodes, devices


def cpu_times():
    """Per CPU (busy, total) jiffies; idle and iowait are not busy."""
    out = {}
    for line in open("/proc/stat"):
        m = re.match(r"cpu(\d+) (.*)", line)
        if m:
            v = [int(x) for x in m.group(2).split()[:8]]
            out[int(m.group(1))] = (sum(v) - v[3] - v[4], sum(v))
    return out


# Interrupt rows of /proc/interrupts counted per I/O: wake-up IPIs (RES),
# function-call IPIs (CAL, also the kick of a remote CPU), the local timer
# (LOC). Under TCG each costs the one host thread that runs every vCPU.
IRQ_KINDS = {"RES": "resched_ipi", "CAL": "call_ipi", "LOC": "timer_irq"}


def kernel_events():
    """Machine-wide counters since boot: context switches (/proc/stat ctxt),
    the interrupt kinds of IRQ_KINDS and every device interrupt ("dev_irq"),
    each summed over the CPUs."""
    ev = {"ctxt": 0, "dev_irq": 0, **{name: 0 for name in IRQ_KINDS.values()}}
    for line in open("/proc/stat"):
        if line.startswith("ctxt "):
            ev["ctxt"] = int(line.split()[1])
    with open("/proc/interrupts") as f:
        ncpus = len(f.readline().split())
        for line in f:
            fields = line.split()
            if not fields or not fields[0].endswith(":"):
                continue
            label = fields[0][:-1]
            counts = sum(int(x) for x in fields[1:1 + ncpus] if x.isdigit())
            if label in IRQ_KINDS:
                ev[IRQ_KINDS[label]] += counts
            elif label.isdigit():
                ev["dev_irq"] += counts
    return ev


# ------------------------------------------------------------------ referee --
class BioReferee:
    """One bpftrace for the whole boot: cumulative bios per (dev, node), and
    task migrations per (from CPU, to CPU).

    Its output is read incrementally: a snapshot is taken at both ends of every
    point's window, while the load runs, and re-reading a file that grows by a
    block a second for hours would cost more at every point of a long run.
    """

    def __init__(self):
        self.path = os.path.join(WORK, "bench-bpftrace.out")
        script = BT_SCRIPT
        if NODE_TASKS:
            # Its probe before the script's interval block, which prints @ontime.
            text = open(BT_SCRIPT).read()
            if "interval:s:1\n{\n" not in text:
                raise RuntimeError(f"BENCH_NODE_TASKS: no interval:s:1 block in {BT_SCRIPT}")
            text = text.replace(
                "interval:s:1\n{\n", NODE_TASKS_BT + "\ninterval:s:1\n{\n\tprint(@ontime);\n", 1)
            script = os.path.join(WORK, "bench-referee.bt")
            with open(script, "w") as f:
                f.write(text)
        self.proc = subprocess.Popen(
            ["bpftrace", "-B", "line", script], stdout=open(self.path, "w"),
            stderr=subprocess.STDOUT)
        self._out = open(self.path)
        self._partial, self._ticks = "", 0
        self._cur, self._last = self._empty(), self._empty()
        deadline = time.time() + 180
        while self.ticks() < 1:
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("bpftrace did not attach: " + open(self.path).read()[-500:])
            time.sleep(0.5)

    @staticmethod
    def _empty():
        return {"bios": {}, "migr": {}, "ontime": {}}

    def ticks(self):
        """Complete blocks printed so far; reads only what is new."""
        lines = (self._partial + self._out.read()).split("\n")
        self._partial = lines.pop()  # not terminated yet: read again next time
        for line in lines:
            m = re.match(r"@(bios|migr)\[(\d+), (\d+)\]: (\d+)", line)
            if m:
                self._cur[m.group(1)][(int(m.group(2)), int(m.group(3)))] = int(m.group(4))
            elif m := re.match(r"@ontime\[(\d+), (.*)\]: (\d+)$", line):
                self._cur["ontime"][(int(m.group(1)), m.group(2))] = int(m.group(3))
            elif line.startswith("ESN_TICK "):
                self._last, self._cur = self._cur, self._empty()
                self._ticks += 1
        return self._ticks

    def snapshot(self):
        """The counts at the next tick from now (bpftrace prints each second):
        {"bios": {(dev, node): n}, "migr": {(from_cpu, to_cpu): n},
        "ontime": {(node, task name): ns}} ("ontime" empty without NODE_TASKS)."""
        n = self.ticks()
        deadline = time.time() + 10
        while self.ticks() < n + 1 and time.time() < deadline:
            time.sleep(0.2)
        return self._last

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# --------------------------------------------------------------- schedulers --
def sx_state():
    try:
        return open("/sys/kernel/sched_ext/state").read().strip()
    except OSError:
        return "missing"


def sx_ops():
    try:
        return open("/sys/kernel/sched_ext/root/ops").read().strip()
    except OSError:
        return ""


def wait_disabled(limit):
    deadline = time.time() + limit
    while sx_state() != "disabled" and time.time() < deadline:
        time.sleep(0.2)
    return sx_state() == "disabled"


LEARNING_ARGS = ["--no-state", "--stats", "1", "--control-interval", "1"]


def sched_command(name):
    if name == "eevdf":
        return None
    if name == "esn":
        return [ESN] + LEARNING_ARGS
    if name == "esn-tput":
        # The same build, learning for the devices' throughput (--objective).
        return [ESN] + LEARNING_ARGS + ["--objective", "throughput"]
    if name == "esn-base":
        # Another build of scx_esn (BENCH_ESN_BASE), learning too: a change's
        # before and after, side by side in one boot.
        return [os.environ["BENCH_ESN_BASE"]] + LEARNING_ARGS
    if name == "floor":
        # sched_ext with no BPF callbacks (tests/floor): the cost of sched_ext itself.
        return [FLOOR]
    m = re.fullmatch(r"esn-t(\d+)", name)
    if m:
        return [ESN, "--threshold", m.group(1), "--stats", "1"]
    return [os.path.join(PEERS, name)]


class Scheduler:
    """A sched_ext scheduler in the background, up when sched_ext says so."""

    def __init__(self, name, tag):
        self.name, self.proc = name, None
        self.out = os.path.join(WORK, f"sched-{tag}.out")
        cmd = sched_command(name)
        self.load_s = 0.0
        if cmd is None:
            return
        if not wait_disabled(30):
            raise RuntimeError(f"sched_ext still '{sx_state()}' from the previous scheduler")
        t0 = time.time()
        self.proc = subprocess.Popen(cmd, stdout=open(self.out, "w"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        want = "esn" if name.startswith("esn") or name == "floor" else name.removeprefix("scx_")
        while time.time() - t0 < 120:
            if sx_state() == "enabled" and sx_ops().startswith(want):
                self.load_s = time.time() - t0
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = open(self.out).read()[-400:]
        self.stop()
        raise RuntimeError(f"{name} did not load (state {sx_state()}, ops '{sx_ops()}'): {tail}")

    def alive(self):
        return self.proc is None or (self.proc.poll() is None and sx_state() == "enabled")

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        wait_disabled(30)

    def control_lines(self):
        """[(node, [learned threshold, placed, P_numa + spill, P_cont])] of every
        'control nN:' line, in order (one per control interval; exploration taken
        out of the threshold; a P the line shows as '-' is None)."""
        out = []
        for line in open(self.out, errors="replace"):
            m = re.match(r"control n(\d+): threshold (\d+)( \(exploring\))? placed (\d+)", line)
            if not m:
                continue
            ps = re.search(r"P_numa ([\d.]+) \w+ \+ spill ([\d.]+), P_cont ([\d.]+|-)", line)
            p_spill = float(ps.group(1)) + float(ps.group(2)) if ps else None
            p_cont = float(ps.group(3)) if ps and ps.group(3) != "-" else None
            out.append((m.group(1), [int(m.group(2)) - (1 if m.group(3) else 0), int(m.group(4)),
                                     p_spill, p_cont]))
        return out

    def control_trace(self):
        """{node: [[learned threshold, placed, P_numa + spill, P_cont], ...]}, one
        entry per control interval: what report.py reads how long the threshold
        took to settle from, and what it weighed at each step."""
        out = {}
        for node, entry in self.control_lines():
            out.setdefault(node, []).append(entry)
        return out


def proc_cpu_ticks(proc):
    """utime + stime of a process (all its threads), in clock ticks; None if gone."""
    if proc is None:
        return None
    try:
        fields = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def sched_bpf_costs(sched):
    """The scheduler process's BPF programs' cumulative cost; None for EEVDF."""
    if sched.proc is None or not BPF_STATS:
        return None
    return prog_costs(sched.proc.pid)


# -------------------------------------------------------------------- loads --
def load_spec(name):
    """(kind, jobs per device, engine, iodepth) of a load name."""
    m = re.fullmatch(r"(hog-)?io-(\d+)", name)
    if m:
        return ("hog-io" if m.group(1) else "io", int(m.group(2)), "psync", 1)
    m = re.fullmatch(r"aio-(\d+)", name)
    if m:
        return ("io", 1, "libaio", int(m.group(1)))
    if name in ("cpu", "hackbench", "wakeup"):
        return (name, None, None, None)
    raise ValueError(f"unknown load {name}")


def fio_command(devices, jobs, engine, iodepth, runtime, ramp, out):
    cmd = ["fio", "--output-format=json", f"--output={out}", "--group_reporting"]
    for i, d in enumerate(devices):
        cmd += [f"--name=d{i}", f"--filename=/dev/{d['name']}", "--readonly",
                "--rw=randread", "--bs=4k", "--direct=1", f"--ioengine={engine}",
                f"--iodepth={iodepth}", f"--numjobs={jobs}", "--time_based",
                f"--runtime={runtime}", f"--ramp_time={ramp}"]
    return cmd


def parse_fio(path):
    j = json.load(open(path))["jobs"][0]["read"]
    pct = j["clat_ns"].get("percentile", {})
    return {
        "iops": j["iops"],
        "ios": j["total_ios"],
        "p50_us": pct.get("50.000000", 0) / 1e3 or None,
        "p99_us": pct.get("99.000000", 0) / 1e3 or None,
        "lat_mean_us": j["clat_ns"].get("mean", 0) / 1e3 or None,
    }


def cyclictest_command(threads, interval_us, secs):
    """Fair (SCHED_OTHER) wakers for parse_probe: its histogram, quiet."""
    return ["cyclictest", "-q", "--policy=other", "-t", str(threads), "-i", str(interval_us),
            "-D", f"{secs}", "-h", str(PROBE_HIST_US), "--default-system"]


def parse_probe(text):
    """Mean, p99 and max wake-up latency (µs) from cyclictest's histogram output
    (-h), over all its threads: the histogram's columns summed, the threads'
    means averaged, the largest max. A p99 past the histogram's bound reads as
    the bound ("at least")."""
    counts, overflows = {}, 0
    avgs, maxes = [], []
    for line in text.splitlines():
        if m := re.fullmatch(r"(\d+)((?:\s+\d+)+)", line.strip()):
            counts[int(m.group(1))] = sum(int(c) for c in m.group(2).split())
        elif m := re.match(r"# Avg Latencies:((?:\s+\d+)+)", line):
            avgs = [int(v) for v in m.group(1).split()]
        elif m := re.match(r"# Max Latencies:((?:\s+\d+)+)", line):
            maxes = [int(v) for v in m.group(1).split()]
        elif m := re.match(r"# Histogram Overflows:((?:\s+\d+)+)", line):
            overflows = sum(int(v) for v in m.group(1).split())
    total = sum(counts.values()) + overflows
    if not total:
        return {}
    seen, p99 = 0, PROBE_HIST_US
    for us in sorted(counts):
        seen += counts[us]
        if seen >= 0.99 * total:
            p99 = us
            break
    return {"probe_wake_avg_us": sum(avgs) / len(avgs) if avgs else None,
            "probe_wake_p99_us": p99, "probe_wake_max_us": max(maxes) if maxes else None}


def parse_stress_ng(text):
    # --metrics-brief: "stress-ng: info:  [pid] cpu  BOGO_OPS  REAL_S  USR_S  SYS_S
    # OPS_PER_S_REAL  OPS_PER_S_CPU" (newer versions say "metrc:" for "info:").
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 10 and f[3] == "cpu" and re.fullmatch(r"[\d.]+", f[8]):
            return float(f[8])
    return None


def hog_command(ncpus, secs):
    return ["stress-ng", "--cpu", str(ncpus), "--timeout", f"{secs}s", "--metrics-brief",
            "--temp-path", WORK]


def migrations(migr0, migr1, nodes):
    """Task migrations between two referee snapshots: all, and those whose
    two CPUs are on different nodes."""
    node_of = {c: n["id"] for n in nodes for c in n["cpus"]}
    moved = across = 0
    for (src, dst), cnt in migr1.items():
        delta = cnt - migr0.get((src, dst), 0)
        moved += delta
        if node_of.get(src) != node_of.get(dst):
            across += delta
    return moved, across


def idle_node_tasks(ontime0, ontime1, devices, window_s, top=6):
    """The tasks that ran on the nodes without a device between two referee
    snapshots, busiest first: {task name: % of one CPU over the window},
    per-CPU kernel threads folded into one row each (kworker/*), idle left out."""
    dev_nodes = {d["node"] for d in devices}
    busy = {}
    for (node, comm), ns in ontime1.items():
        if node in dev_nodes or comm.startswith("swapper/"):
            continue
        name = PER_CPU_KTHREAD.sub(r"\1/*", comm)
        busy[name] = busy.get(name, 0) + ns - ontime0.get((node, comm), 0)
    ranked = sorted(busy.items(), key=lambda kv: -kv[1])[:top]
    return {name: round(100.0 * ns / 1e9 / window_s, 2) for name, ns in ranked if ns > 0}


def window_figures(before, after, nodes, devices, bios0, bios1):
    """CPU and locality figures over one window of a point."""
    busy = sum(after[c][0] - before[c][0] for c in after if c in before)
    dev_nodes = {d["node"] for d in devices}
    node_busy = {}
    for n in nodes:
        b = sum(after[c][0] - before[c][0] for c in n["cpus"] if c in after and c in before)
        t = sum(after[c][1] - before[c][1] for c in n["cpus"] if c in after and c in before)
        if t:
            node_busy[str(n["id"])] = 100.0 * b / t
    idle = [node_busy[str(n["id"])] for n in nodes
            if n["id"] not in dev_nodes and str(n["id"]) in node_busy]
    local = total = 0
    for d in devices:
        for (dev, node), cnt in bios1.items():
            if dev != d["devt"]:
                continue
            delta = cnt - bios0.get((dev, node), 0)
            total += delta
            if node == d["node"]:
                local += delta
    hz = os.sysconf("SC_CLK_TCK")
    return {
        "busy_cpu_s": busy / hz,
        "node_busy_pct": node_busy,
        "idle_nodes_busy_pct": sum(idle) / len(idle) if idle else None,
        "bios": total,
        "local_share_pct": 100.0 * local / total if total else None,
    }


def energy_meter():
    """`scx_esn energy` over the window: the CPUs' energy under any scheduler
    (in the VM the model's estimate: no RAPL there)."""
    return subprocess.Popen([ESN, "energy", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def energy_figures(meter, point):
    """Mean watts from the load's start (ramp included) to its end, mJ per
    I/O (those watts over fio's window) and the research's trade-off,
    throughput / (latency x energy): IOPS / (mean latency ms x mJ per I/O)."""
    meter.send_signal(signal.SIGINT)
    try:
        out, err = meter.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        meter.kill()
        out, err = meter.communicate()
    if meter.returncode != 0 or not out.strip():
        # The point stands without its energy figures: the meter is not
        # the scheduler under test.
        point["energy_error"] = f"scx_esn energy exit {meter.returncode}: {err[-300:]}"
        return
    e = json.loads(out)
    point["energy_source"] = e["source"]
    point["energy_w"] = e["watts"]
    point["energy_window_s"] = e["elapsed_s"]
    if point.get("ios") and point.get("window_s"):
        point["energy_per_io_mj"] = 1e3 * e["watts"] * point["window_s"] / point["ios"]
        if point.get("lat_mean_us") and point.get("iops"):
            point["tradeoff"] = point["iops"] / (point["lat_mean_us"] / 1e3
                                                 * point["energy_per_io_mj"])


def run_point(load, sched_name, ctx):
    kind, jobs, engine, iodepth = load_spec(load)
    runtime, ramp = ctx["runtime"], ctx["ramp"]
    ncpus = sum(len(n["cpus"]) for n in ctx["nodes"])
    tag = f"{ctx['penalty']}-{ctx['rep']}-{load}-{sched_name}"
    point = {"kind": "point", "penalty": ctx["penalty"], "rep": ctx["rep"], "load": load,
             "load_kind": kind, "jobs": jobs, "sched": sched_name, "ok": False}
    sched, procs, meter, sampler = None, {}, None, None
    try:
        # A scheduler that does not load is a failed point like any other.
        sched = Scheduler(sched_name, tag)
        point["sched_load_s"] = round(sched.load_s, 2)
        # Before the load: started under 8 fio jobs, the meter's own start
        # took seconds in the VM and its window missed most of the point.
        # Its mean power then covers the ramp too, where the load runs alike.
        meter = energy_meter()
        fio_json = os.path.join(WORK, f"fio-{tag}.json")
        if kind in ("io", "hog-io"):
            procs["fio"] = subprocess.Popen(
                fio_command(ctx["devices"], jobs, engine, iodepth, runtime, ramp, fio_json),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if kind in ("hog-io", "cpu"):
            # Beside fio the hog runs until fio ends (stopped below), not for
            # a fixed time: fio's own start under a hog on every CPU took up
            # to 6 s in the VM where a scheduler makes wakers wait for a
            # slice, and a hog that ended on its clock left fio's last
            # seconds hog-free, for that scheduler only.
            hog_secs = runtime + ramp + (HOG_OUTLAST_S if kind == "hog-io" else 0)
            procs["hog"] = subprocess.Popen(hog_command(ncpus, hog_secs), stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True)
        if kind == "hackbench":
            procs["hackbench"] = subprocess.Popen(["hackbench", "-g", "4", "-l", "300"],
                                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                  text=True)
        if kind == "wakeup":
            procs["cyclictest"] = subprocess.Popen(
                cyclictest_command(ncpus, 1000, runtime + ramp),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(ramp)
        if WAKE_PROBE and kind in ("io", "hog-io"):
            # After the ramp, for fio's window and no longer.
            procs["probe"] = subprocess.Popen(cyclictest_command(1, 2000, runtime),
                                              stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True)
        ref0 = ctx["referee"].snapshot()
        stat0, bpf0, events0 = cpu_times(), sched_bpf_costs(sched), kernel_events()
        if bpf0 is not None and BPF_SAMPLE_MS > 0:
            sampler = IntervalSampler(sched.proc.pid, BPF_SAMPLE_MS / 1000).start()
        own0 = proc_cpu_ticks(sched.proc)
        t0 = time.time()
        outputs = {}
        for name, p in procs.items():
            if name == "hog" and "fio" in procs:
                # fio is done (procs keeps insertion order): stress-ng stops on
                # SIGINT and still prints its metrics.
                p.send_signal(signal.SIGINT)
            try:
                outputs[name] = p.communicate(timeout=runtime + ramp + HOG_OUTLAST_S + 120)[
                    1 if name == "fio" else 0]
            except subprocess.TimeoutExpired:
                p.kill()
                outputs[name] = p.communicate()[1 if name == "fio" else 0]
                raise RuntimeError(f"{name} did not finish in time")
            if p.returncode != 0:
                raise RuntimeError(f"{name} exit {p.returncode}: {(outputs[name] or '')[-300:]}")
        stat1, bpf1, events1 = cpu_times(), sched_bpf_costs(sched), kernel_events()
        if sampler is not None:
            # {program: [median ns per run over the intervals, intervals]}.
            point["bpf_median"], sampler = sampler.stop(), None
        own1 = proc_cpu_ticks(sched.proc)
        point["window_s"] = round(time.time() - t0, 2)
        if own0 is not None and own1 is not None:
            # The scheduler's own userspace, in % of one CPU over the window.
            point["sched_cpu_pct"] = 100.0 * (own1 - own0) / os.sysconf("SC_CLK_TCK") \
                / point["window_s"]
        ref1 = ctx["referee"].snapshot()
        if bpf0 is not None and bpf1 is not None:
            # {program: [run_time_ns, runs]} over the window (kernel.bpf_stats).
            point["bpf"] = cost_delta(bpf0, bpf1)
        if not sched.alive():
            raise RuntimeError(f"{sched_name} died during the point: {open(sched.out).read()[-300:]}")
        win = window_figures(stat0, stat1, ctx["nodes"], ctx["devices"], ref0["bios"],
                             ref1["bios"])
        point["node_busy_pct"] = win["node_busy_pct"]
        point["idle_nodes_busy_pct"] = win["idle_nodes_busy_pct"]
        if NODE_TASKS:
            point["idle_node_tasks_pct"] = idle_node_tasks(
                ref0["ontime"], ref1["ontime"], ctx["devices"], point["window_s"])
        if "fio" in procs:
            point.update(parse_fio(fio_json))
            point["bios"] = win["bios"]
            point["local_share_pct"] = win["local_share_pct"]
            if point["ios"]:
                point["cpu_per_io_us"] = 1e6 * win["busy_cpu_s"] / point["ios"]
                for name in events1:
                    point[f"{name}_per_io"] = (events1[name] - events0[name]) / point["ios"]
                moved, across = migrations(ref0["migr"], ref1["migr"], ctx["nodes"])
                point["migr_per_io"] = moved / point["ios"]
                point["xnode_migr_per_io"] = across / point["ios"]
        energy_figures(meter, point)
        if "hog" in procs:
            point["cpu_ops_per_s"] = parse_stress_ng(outputs["hog"])
            with open(os.path.join(WORK, f"stress-ng-{tag}.out"), "w") as f:
                f.write(outputs["hog"])
        if "hackbench" in procs:
            m = re.search(r"Time: ([\d.]+)", outputs["hackbench"])
            point["hackbench_s"] = float(m.group(1)) if m else None
        if "probe" in procs:
            point.update(parse_probe(outputs["probe"]))
        if "cyclictest" in procs:
            wake = parse_probe(outputs["cyclictest"])
            for fig in ("avg", "p99", "max"):
                point[f"wakeup_{fig}_us"] = wake.get(f"probe_wake_{fig}_us")
        if sched_name in ("esn", "esn-tput"):
            trace = sched.control_trace()
            point["control_trace"] = trace
            # The threshold each node ended with (exploration taken out).
            point["threshold"] = {node: entries[-1][0] for node, entries in trace.items()}
        point["ok"] = True
    except Exception as e:  # noqa: BLE001 - a failed point is data, the run goes on
        point["error"] = str(e)[-500:]
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    finally:
        if sampler is not None:  # the point failed before its window closed
            sampler.cancel()
        if meter is not None and meter.poll() is None:
            meter.kill()
            meter.communicate()
        if sched is not None:
            sched.stop()
    return point


# ----------------------------------------------------------------------- lab --
class Lab:
    def __init__(self, penalty):
        self.proc, self.line, self.exit = None, "", ""
        if penalty == "off":
            self.line = "lab off"
            return
        self.err = os.path.join(WORK, f"lab-{penalty}.err")
        self.outp = os.path.join(WORK, f"lab-{penalty}.out")
        self.proc = subprocess.Popen([LAB, "--factor", penalty], stdout=open(self.outp, "w"),
                                     stderr=open(self.err, "w"), stdin=subprocess.DEVNULL)
        deadline = time.time() + 180
        while time.time() < deadline:
            text = open(self.outp).read()
            if "remote-penalty: active" in text:
                self.line = text.strip().splitlines()[0]
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"lab --factor {penalty} did not start: {open(self.err).read()[-400:]}")

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.exit = open(self.err).read().strip().splitlines()[-1:] or [""]
        self.exit = self.exit[0]


# ---------------------------------------------------------------------- main --
def main():
    raw_path = os.environ["BENCH_RAW"]
    os.makedirs(WORK, exist_ok=True)
    nodes, devices = read_topology()
    if not devices:
        sys.exit("bench: no NVMe device in the guest")
    dev_node_cpus = min(len(n["cpus"]) for n in nodes if n["id"] in {d["node"] for d in devices})
    scheds = []
    for s in env_list("BENCH_SCHEDULERS", "eevdf esn oracle scx_bpfland scx_rusty scx_cosmos"):
        if s in ("oracle", "oracle-wide"):
            scheds += [f"esn-t{n}" for n in range(1, dev_node_cpus + 1)]
        if s == "oracle-wide":
            # Twice and four times the CPU count too: --objective throughput may
            # keep that many (every job local: in the lab the best point at 4 and 8
            # jobs on a 2-CPU node).
            scheds += [f"esn-t{n * dev_node_cpus}" for n in (2, 4)]
        elif s != "oracle":
            scheds.append(s)
    if "esn-base" in scheds and not os.access(os.environ.get("BENCH_ESN_BASE", ""), os.X_OK):
        sys.exit("bench: esn-base needs BENCH_ESN_BASE=<an executable scx_esn build>")
    penalties = env_list("BENCH_PENALTIES", "off 2.0")
    # Penalties where only EEVDF and learned scx_esn run (the full run's 1.1).
    light = env_list("BENCH_LIGHT_PENALTIES", "")
    loads = env_list("BENCH_LOADS", "io-1 io-2 io-4 io-8")
    # Loads that do not depend on the lab's penalty run at the first penalty only.
    no_penalty_loads = {"cpu", "hackbench", "wakeup"}
    repeats = int(os.environ.get("BENCH_REPEATS", "3"))
    ctx = {"nodes": nodes, "devices": devices,
           "runtime": int(os.environ.get("BENCH_RUNTIME", "20")),
           "ramp": int(os.environ.get("BENCH_RAMP", "3"))}
    peers = {s: _peer_version(s) for s in scheds if s.startswith("scx_")}
    meta = {"kind": "meta", "topology": os.environ.get("ESN_VM_TOPOLOGY", "?"),
            "kernel": os.uname().release, "date": datetime.now(timezone.utc).date().isoformat(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "nodes": nodes, "devices": [{"name": d["name"], "node": d["node"]} for d in devices],
            "schedulers": scheds, "loads": loads, "penalties": penalties + light,
            "light_penalties": light, "repeats": repeats, "runtime_s": ctx["runtime"],
            "ramp_s": ctx["ramp"], "mode": os.environ.get("BENCH_MODE", "full"), "peers": peers,
            "esn_base": os.environ.get("BENCH_ESN_BASE") or None, "bpf_stats": BPF_STATS}
    done, boots = set(), 0
    if os.path.exists(raw_path):
        # A guest that died mid-write leaves a line without its newline: drop it,
        # or the next record would be glued to it.
        with open(raw_path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)
        for line in open(raw_path):
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # the line a dying guest left half-written
            if rec.get("kind") == "point":
                done.add((rec["penalty"], rec["rep"], rec["load"], rec["sched"]))
            boots += rec.get("kind") == "boot"
    raw = open(raw_path, "a")

    def emit(obj):
        raw.write(json.dumps(obj) + "\n")
        raw.flush()
        os.fsync(raw.fileno())

    if not boots:
        emit(meta)
    emit({"kind": "boot", "n": boots + 1, "resumed_after_points": len(done)})
    if done:
        log(f"bench: boot {boots + 1}: resuming after {len(done)} points")
    log(f"bench: {meta['topology']} nodes {nodes} devices {devices}")
    log(f"bench: schedulers {scheds}; loads {loads}; penalties {penalties} (+light {light}); "
        f"{repeats} repeats; {ctx['runtime']} s + {ctx['ramp']} s ramp")
    if BPF_STATS:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
    ctx["referee"] = BioReferee()
    log("bench: bpftrace referee attached")
    n_ok = n_fail = 0
    for pi, penalty in enumerate(penalties + light):
        ctx["penalty"] = penalty
        block_scheds = ["eevdf", "esn"] if penalty in light else scheds
        plan = []
        for rep in range(1, repeats + 1):
            for load in loads:
                if load in no_penalty_loads and pi > 0:
                    continue
                k = (rep - 1) % len(block_scheds)
                plan += [(rep, load, s) for s in block_scheds[k:] + block_scheds[:k]
                         if (penalty, rep, load, s) not in done]
        if not plan:
            continue
        try:
            lab = Lab(penalty)
        except RuntimeError as e:
            log(f"bench: {e}")
            emit({"kind": "lab", "penalty": penalty, "line": f"FAILED: {e}", "exit": ""})
            continue
        log(f"bench: penalty {penalty}: {lab.line}")
        # Written now: a boot that dies in the block never reaches lab.stop().
        emit({"kind": "lab", "penalty": penalty, "line": f"boot {boots + 1}: {lab.line}",
              "exit": "(the block's end is on a later line if this boot finished it)"})
        for rep, load, sched_name in plan:
            ctx["rep"] = rep
            t0 = time.time()
            point = run_point(load, sched_name, ctx)
            emit(point)
            n_ok += point["ok"]
            n_fail += not point["ok"]
            figs = " ".join(f"{f}={point[f]:.1f}" for f in
                            ("iops", "p99_us", "local_share_pct", "cpu_ops_per_s",
                             "hackbench_s", "wakeup_avg_us", "probe_wake_p99_us",
                             "sched_cpu_pct")
                            if isinstance(point.get(f), (int, float)))
            log(f"point {penalty} r{rep} {load:10s} {sched_name:12s} "
                f"{'ok ' if point['ok'] else 'FAIL'} {time.time() - t0:5.1f}s {figs} "
                f"{point.get('threshold', '')} {point.get('error', '')}")
        lab.stop()
        emit({"kind": "lab", "penalty": penalty, "line": f"boot {boots + 1}: end of the block",
              "exit": lab.exit})
    ctx["referee"].stop()
    emit({"kind": "end", "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
          "boots": boots + 1})
    log(f"bench: done: {n_ok} points ok, {n_fail} failed in this boot")


def _peer_version(name):
    """The version in the cache directory the peer's link points into."""
    target = os.path.realpath(os.path.join(PEERS, name))
    m = re.search(rf"{re.escape(name)}-([\d.]+)/bin/", target)
    return m.group(1) if m else "?"


if __name__ == "__main__":
    main()
