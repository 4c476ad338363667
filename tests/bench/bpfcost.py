#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""What a process's BPF programs cost, from the kernel's own accounting.

With kernel.bpf_stats_enabled=1 the kernel times every run of every BPF
program (run_time_ns, run_cnt in the fdinfo of each program fd). A process
that loaded programs holds their fds, so summing its fdinfo gives its BPF
cost with no tool of our own in the measurement. A program's name comes from
/proc/kallsyms (bpf_prog_<tag>_<name>), listed only while it is loaded.

Used by guest_bench.py (per point, per scheduler) and observe-cost.sh:

    bpfcost.py PID [FILE]   prints "run_time_ns run_cnt programs" summed over
                            PID's programs; with FILE, also writes one line
                            per program there: "name run_time_ns run_cnt".
                            Exit 1 if PID is gone.
"""

import os
import re
import sys


def _prog_fds(pid):
    """(tag, run_time_ns, run_cnt) of every BPF program fd of PID; None if gone."""
    d = f"/proc/{pid}/fdinfo"
    if not os.path.isdir(d):
        return None
    progs = []
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                fields = dict((k.strip(), v.strip())
                              for k, _, v in (line.partition(":") for line in f))
        except OSError:  # closed meanwhile
            continue
        # Only program fds have run_cnt.
        if "run_cnt" in fields and "run_time_ns" in fields:
            progs.append((fields.get("prog_tag", "?"), int(fields["run_time_ns"]),
                          int(fields["run_cnt"])))
    return progs


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
