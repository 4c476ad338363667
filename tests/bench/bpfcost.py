#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What a process's BPF programs cost, from the kernel's own accounting.

With kernel.bpf_stats_enabled=1 the kernel times every run of every BPF
program (run_time_ns, run_cnt in the fdinfo of each program fd). A process
that loaded programs holds their fds, so summing its fdinfo gives its BPF
cost with no tool of our own in the measurement. A program's name comes from
/proc/kallsyms (bpf_prog_<tag>_<name>), listed only while it is loaded.

Used by guest_bench.py (per point, per scheduler; also IntervalSampler, the
median over 100 ms intervals) and observe-cost.sh:

    bpfcost.py PID [FILE]   prints "run_time_ns run_cnt programs" summed over
                            PID's programs; with FILE, also writes one line
                            per program there: "name run_time_ns run_cnt".
                            Exit 1 if PID is gone.
"""

import os
import re
import statistics
import sys
import threading


def _read_prog_fd(pid, fd):
    """(tag, run_time_ns, run_cnt) of one fd of PID if it is a BPF program (only
    program fds have run_cnt); None otherwise or if it closed meanwhile."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as f:
            fields = dict((k.strip(), v.strip())
                          for k, _, v in (line.partition(":") for line in f))
        return fields.get("prog_tag", "?"), int(fields["run_time_ns"]), int(fields["run_cnt"])
    except (OSError, KeyError, ValueError):
        return None


def _prog_fds(pid):
    """(tag, run_time_ns, run_cnt) of every BPF program fd of PID; None if gone."""
    d = f"/proc/{pid}/fdinfo"
    if not os.path.isdir(d):
        return None
    return [prog for prog in (_read_prog_fd(pid, fd) for fd in os.listdir(d)) if prog]


def _names_by_tag():
    names = {}
    try:
        with open("/proc/kallsyms") as f:
            for m in re.finditer(r" bpf_prog_([0-9a-f]{16})_(\S+)", f.read()):
                names.setdefault(m.group(1), set()).add(m.group(2))
    except OSError:
        pass
    return names


def _prog_name(names, tag):
    return "/".join(sorted(names.get(tag, ()))) or f"tag:{tag}"


def prog_costs(pid):
    """{program name: [run_time_ns, run_cnt]} of PID's programs; None if PID is gone.

    Programs with the same name (a tp_btf and a raw_tp twin, one of which
    never runs) are summed.
    """
    progs = _prog_fds(pid)
    if progs is None:
        return None
    names = _names_by_tag()
    out = {}
    for tag, ns, cnt in progs:
        acc = out.setdefault(_prog_name(names, tag), [0, 0])
        acc[0] += ns
        acc[1] += cnt
    return out


def cost_delta(before, after):
    """after - before per program, programs that ran in between only."""
    out = {}
    for name, (ns, cnt) in (after or {}).items():
        ns0, cnt0 = (before or {}).get(name, (0, 0))
        if cnt > cnt0:
            out[name] = [ns - ns0, cnt - cnt0]
    return out


class IntervalSampler:
    """Per program, the median over short intervals of ns per run.

    Why not the window's sum: in a VM whose guest clock runs while a vCPU
    waits for its host thread (single-threaded TCG switches vCPUs every
    100 ms), a program the switch lands in is timed with the other vCPUs'
    turns, and a handful of such runs decide a whole window's mean. Sampled
    every PERIOD seconds, only the few intervals holding such a run are off,
    and the median over the intervals leaves them out. Reads only the fds
    found to be programs at the first sample, so a sample costs one small
    read per program.
    """

    MIN_RUNS = 5  # an interval with fewer runs of a program says little of it

    def __init__(self, pid, period):
        self.pid, self.period = pid, period
        self._fds = [fd for fd in os.listdir(f"/proc/{pid}/fdinfo")
                     if _read_prog_fd(pid, fd) is not None]
        self._samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        snap = {}
        for fd in self._fds:
            got = _read_prog_fd(self.pid, fd)
            if got is not None:
                snap[fd] = got
        self._samples.append(snap)

    def _run(self):
        self._sample()
        while not self._stop.wait(self.period):
            self._sample()

    def start(self):
        self._thread.start()
        return self

    def cancel(self):
        self._stop.set()
        self._thread.join()

    def stop(self):
        """{program name: [median ns per run, intervals]}; call while the
        programs are still loaded (their names come from /proc/kallsyms)."""
        self.cancel()
        self._sample()
        return interval_medians(self._samples, _names_by_tag(), self.MIN_RUNS)


def interval_medians(samples, names, min_runs):
    """samples: [{fd: (tag, ns, runs)}] in time order. Programs of the same
    name (a tp_btf and its raw_tp twin) are summed within an interval."""
    per_name = {}
    for before, after in zip(samples, samples[1:]):
        delta = {}
        for fd, (tag, ns, runs) in after.items():
            if fd not in before:
                continue
            acc = delta.setdefault(_prog_name(names, tag), [0, 0])
            acc[0] += ns - before[fd][1]
            acc[1] += runs - before[fd][2]
        for name, (ns, runs) in delta.items():
            if runs >= min_runs:
                per_name.setdefault(name, []).append(ns / runs)
    return {name: [statistics.median(v), len(v)] for name, v in per_name.items()}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(f"usage: {sys.argv[0]} PID [FILE]")
    progs = _prog_fds(sys.argv[1])
    if progs is None:
        sys.exit(1)
    if len(sys.argv) == 3:
        names = _names_by_tag()
        with open(sys.argv[2], "w") as f:
            for tag, ns, cnt in progs:
                f.write(f"{_prog_name(names, tag)} {ns} {cnt}\n")
    print(sum(p[1] for p in progs), sum(p[2] for p in progs), len(progs))


if __name__ == "__main__":
    main()
