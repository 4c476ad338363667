#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Per-callback BPF cost of scheduler builds side by side (callback-ab.sh).

    callback_ab.py --delta BEFORE AFTER ROUND BUILD LOAD
        Two bpfcost.py program files ("name run_time_ns run_cnt" lines) of one
        build under one load: prints a TSV line per program that ran between
        them (round, build, load, callback, run_time_ns, run_cnt). The
        callback is the program name without the scheduler's prefix
        (esn_running, bpfland_running -> running).
    callback_ab.py TSV [REF]
        The report: ns per call per round for every build, then each build's
        ratio to the first build and to REF (a build name), both as the
        median of the per-round ratios and pooled (all rounds' time over all
        rounds' calls). Single-threaded TCG makes one window's mean jump when
        a vCPU switch lands inside a few runs; the rounds interleave the
        builds, so the median of per-round ratios is the figure to read.
    callback_ab.py TSV [REF] --calls CALLPROF_TSV
        The same, then the per-call figures of esn-callprof (guest side:
        round, build, load, callback, calls, mean, p10, p50, p90, p99 in ns;
        callback "floor" is the profiler timing an empty program): each
        callback's median call less the floor's median in the same run, per
        round, and each build's ratio to the first build and to REF as the
        median of the per-round ratios. A call's median is not moved by the
        few calls a vCPU switch lands in, which is what makes the means above
        spread. Two more rows weigh each callback's median by its calls:
        "per run" is running, stopping and runnable over the runs (running's
        calls), "per wake" select_cpu, enqueue and runnable over the
        wake-ups (select_cpu's calls), and "all/wake" every callback over
        the wake-ups. Schedulers split their work between callbacks
        differently, and call enqueue and dispatch more or less often; these
        rows compare what a run, a wake-up, and all the scheduling per
        wake-up cost. The per-call rows stay the issue's measure.
    callback_ab.py --selftest
"""

import collections
import statistics
import sys

CALLBACKS = ("select_cpu", "enqueue", "dispatch", "running", "stopping", "runnable")
# (row, callbacks summed, the callback whose calls count the events)
PER_EVENT = (("per run", ("running", "stopping", "runnable"), "running"),
             ("per wake", ("select_cpu", "enqueue", "runnable"), "select_cpu"),
             ("all/wake", CALLBACKS, "select_cpu"))


def read_costs(path):
    costs = {}
    with open(path) as f:
        for line in f:
            name, ns, cnt = line.split()
            costs[name] = (int(ns), int(cnt))
    return costs


def callback_of(prog_name):
    return prog_name.split("_", 1)[1] if "_" in prog_name else prog_name


def delta_rows(before, after, round_, build, load):
    rows = []
    for name in sorted(after):
        ns0, cnt0 = before.get(name, (0, 0))
        ns1, cnt1 = after[name]
        if cnt1 > cnt0:
            rows.append((round_, build, load, callback_of(name), ns1 - ns0, cnt1 - cnt0))
    return rows


def parse_tsv(lines):
    """{(load, callback, build): {round: (ns, cnt)}} and the builds in order."""
    data = collections.defaultdict(dict)
    builds = []
    for line in lines:
        if not line.strip():
            continue
        round_, build, load, cb, ns, cnt = line.rstrip("\n").split("\t")
        if build not in builds:
            builds.append(build)
        ns0, cnt0 = data[(load, cb, build)].get(round_, (0, 0))
        data[(load, cb, build)][round_] = (ns0 + int(ns), cnt0 + int(cnt))
    return data, builds


def ratios(data, load, cb, build, ref):
    """(median of per-round ratios, pooled ratio) of build to ref, or None."""
    mine, theirs = data.get((load, cb, build), {}), data.get((load, cb, ref), {})
    rounds = [r for r in mine if r in theirs and mine[r][1] and theirs[r][1]]
    if not rounds:
        return None
    per_round = [(mine[r][0] / mine[r][1]) / (theirs[r][0] / theirs[r][1]) for r in rounds]
    pooled = (sum(mine[r][0] for r in rounds) / sum(mine[r][1] for r in rounds)) / (
        sum(theirs[r][0] for r in rounds) / sum(theirs[r][1] for r in rounds))
    return statistics.median(per_round), pooled


def report(data, builds, ref=None):
    out = []
    loads = sorted({k[0] for k in data})
    for load in loads:
        out.append(f"== {load}: ns per call, one figure per round")
        out.append(f"{'callback':12}" + "".join(f"{b:>26}" for b in builds))
        for cb in CALLBACKS:
            cells = []
            for b in builds:
                per = data.get((load, cb, b), {})
                cells.append(" ".join(f"{per[r][0] / per[r][1]:.0f}" for r in sorted(per)) or "-")
            out.append(f"{cb:12}" + "".join(f"{c:>26}" for c in cells))
        for base in [builds[0]] + ([ref] if ref and ref != builds[0] else []):
            out.append(f"   ratio to {base}: median of rounds (pooled)")
            for cb in CALLBACKS:
                cells = []
                for b in builds:
                    r = None if b == base else ratios(data, load, cb, b, base)
                    cells.append(f"{r[0]:.2f} ({r[1]:.2f})" if r else "-")
                out.append(f"{cb:12}" + "".join(f"{c:>26}" for c in cells))
    return "\n".join(out)


def parse_calls(lines):
    """{(load, callback, build): {round: p50 - floor p50}}, the floors
    {(load, build): {round: floor p50}} of esn-callprof lines, and the calls
    {(load, callback, build): {round: calls}}."""
    p50, ncalls = {}, collections.defaultdict(dict)
    for line in lines:
        if not line.strip():
            continue
        round_, build, load, cb, calls, _mean, _p10, median = line.rstrip("\n").split("\t")[:8]
        p50[(round_, build, load, cb)] = float(median)
        if cb != "floor":
            ncalls[(load, cb, build)][round_] = int(calls)
    floors = collections.defaultdict(dict)
    own = collections.defaultdict(dict)
    for (round_, build, load, cb), median in p50.items():
        floor = p50.get((round_, build, load, "floor"))
        if cb == "floor":
            floors[(load, build)][round_] = median
        elif floor is not None:
            own[(load, cb, build)][round_] = median - floor
    return own, floors, ncalls


def per_event(own, ncalls, load, build, summed, counter):
    """{round: ns per event}: the medians of @summed weighted by their calls,
    over @counter's calls; a round without @counter's figure is left out."""
    out = {}
    for round_, events in ncalls.get((load, counter, build), {}).items():
        if not events or round_ not in own.get((load, counter, build), {}):
            continue
        total = sum(own[(load, cb, build)][round_] * ncalls[(load, cb, build)][round_]
                    for cb in summed
                    if round_ in own.get((load, cb, build), {}) and
                    round_ in ncalls.get((load, cb, build), {}))
        out[round_] = total / events
    return out


def calls_report(own, floors, builds, ref=None, ncalls=None):
    out = []
    own = dict(own)
    rows = list(CALLBACKS)
    for load in sorted({k[0] for k in own}):
        for row, summed, counter in PER_EVENT if ncalls else ():
            for b in builds:
                figures = per_event(own, ncalls, load, b, summed, counter)
                if figures:
                    own[(load, row, b)] = figures
                    if row not in rows:
                        rows.append(row)
        out.append(f"== {load}: median ns per call less the profiler's floor (esn-callprof), one figure per round")
        out.append(f"{'callback':12}" + "".join(f"{b:>26}" for b in builds))
        cells = [" ".join(f"{v:.0f}" for _, v in sorted(floors.get((load, b), {}).items())) or "-" for b in builds]
        out.append(f"{'(floor)':12}" + "".join(f"{c:>26}" for c in cells))
        for cb in rows:
            cells = [" ".join(f"{v:.0f}" for _, v in sorted(own.get((load, cb, b), {}).items())) or "-" for b in builds]
            out.append(f"{cb:12}" + "".join(f"{c:>26}" for c in cells))
        for base in [builds[0]] + ([ref] if ref and ref != builds[0] else []):
            out.append(f"   ratio to {base}: median of the per-round ratios [min-max]")
            for cb in rows:
                cells = []
                theirs = own.get((load, cb, base), {})
                for b in builds:
                    mine = own.get((load, cb, b), {})
                    per = [mine[r] / theirs[r] for r in mine if b != base and r in theirs and theirs[r] > 0]
                    cells.append(f"{statistics.median(per):.2f} [{min(per):.2f}-{max(per):.2f}]" if per else "-")
                out.append(f"{cb:12}" + "".join(f"{c:>26}" for c in cells))
    return "\n".join(out)


def selftest():
    before = {"esn_running": (1000, 10), "esn_stopping": (500, 5)}
    after = {"esn_running": (4000, 20), "esn_stopping": (500, 5), "esn_enqueue": (300, 3)}
    rows = delta_rows(before, after, "1", "a", "io-4")
    assert rows == [("1", "a", "io-4", "enqueue", 300, 3), ("1", "a", "io-4", "running", 3000, 10)], rows
    lines = [
        "1\ta\tio-4\trunning\t3000\t10\n", "1\tb\tio-4\trunning\t1500\t10\n",
        "2\ta\tio-4\trunning\t2000\t10\n", "2\tb\tio-4\trunning\t2000\t20\n",
        "3\ta\tio-4\trunning\t1000\t10\n", "3\tb\tio-4\trunning\t400\t10\n",
    ]
    data, builds = parse_tsv(lines)
    assert builds == ["a", "b"]
    med, pooled = ratios(data, "io-4", "running", "b", "a")
    # per round b/a: 150/300 = 0.5, 100/200 = 0.5, 40/100 = 0.4 -> median 0.5
    assert abs(med - 0.5) < 1e-9, med
    # pooled: b 3900/40 = 97.5, a 6000/30 = 200 -> 0.4875
    assert abs(pooled - 0.4875) < 1e-9, pooled
    assert ratios(data, "io-4", "enqueue", "b", "a") is None
    text = report(data, builds)
    assert "0.50 (0.49)" in text, text
    calls = [
        "1\ta\tio-4\tfloor\t20000\t900\t800\t1000\t1200\t5000\n",
        "1\ta\tio-4\trunning\t900\t9000\t2000\t3000\t4000\t900000\n",
        "1\tb\tio-4\tfloor\t20000\t900\t800\t1100\t1200\t5000\n",
        "1\tb\tio-4\trunning\t900\t9000\t2000\t2100\t4000\t900000\n",
        "2\ta\tio-4\tfloor\t20000\t900\t800\t1000\t1200\t5000\n",
        "2\ta\tio-4\trunning\t900\t9000\t2000\t5000\t4000\t900000\n",
        "2\tb\tio-4\tfloor\t20000\t900\t800\t1000\t1200\t5000\n",
        "2\tb\tio-4\trunning\t900\t9000\t2000\t3000\t4000\t900000\n",
        # a round without its floor line is left out
        "3\tb\tio-4\trunning\t900\t9000\t2000\t3000\t4000\t900000\n",
    ]
    own, floors, ncalls = parse_calls(calls)
    assert own[("io-4", "running", "a")] == {"1": 2000.0, "2": 4000.0}, own
    assert own[("io-4", "running", "b")] == {"1": 1000.0, "2": 2000.0}, own
    text = calls_report(own, floors, ["a", "b"])
    # b/a per round: 1000/2000 and 2000/4000 -> 0.50 both
    assert "0.50 [0.50-0.50]" in text, text
    assert "per run" not in text, text
    # Per run: a's running 2000 ns + stopping 1000 ns per run; b has no
    # stopping but a runnable at 500 ns called twice per run: 1000 + 1000.
    events = [
        "1\ta\tio-4\tfloor\t20000\t900\t800\t1000\t1200\t5000\n",
        "1\ta\tio-4\trunning\t100\t0\t0\t3000\t0\t0\n",
        "1\ta\tio-4\tstopping\t100\t0\t0\t2000\t0\t0\n",
        "1\ta\tio-4\tselect_cpu\t50\t0\t0\t2000\t0\t0\n",
        "1\ta\tio-4\tenqueue\t450\t0\t0\t2000\t0\t0\n",
        "1\tb\tio-4\tfloor\t20000\t900\t800\t1000\t1200\t5000\n",
        "1\tb\tio-4\trunning\t100\t0\t0\t2000\t0\t0\n",
        "1\tb\tio-4\trunnable\t200\t0\t0\t1500\t0\t0\n",
        "1\tb\tio-4\tselect_cpu\t200\t0\t0\t2000\t0\t0\n",
        "1\tb\tio-4\tenqueue\t20\t0\t0\t11000\t0\t0\n",
    ]
    own, floors, ncalls = parse_calls(events)
    assert per_event(own, ncalls, "io-4", "a", *PER_EVENT[0][1:]) == {"1": 3000.0}
    assert per_event(own, ncalls, "io-4", "b", *PER_EVENT[0][1:]) == {"1": 2000.0}
    # Per wake: a 1000 + 1000 * 450 / 50 = 10000; b 1000 + 10000 * 20 / 200
    # + 500 * 200 / 200 = 2500.
    assert per_event(own, ncalls, "io-4", "a", *PER_EVENT[1][1:]) == {"1": 10000.0}
    assert per_event(own, ncalls, "io-4", "b", *PER_EVENT[1][1:]) == {"1": 2500.0}
    # All per wake: a (2000*100 + 1000*100 + 1000*50 + 1000*450) / 50 = 16000;
    # b (1000*100 + 500*200 + 1000*200 + 10000*20) / 200 = 3000.
    assert per_event(own, ncalls, "io-4", "a", *PER_EVENT[2][1:]) == {"1": 16000.0}
    assert per_event(own, ncalls, "io-4", "b", *PER_EVENT[2][1:]) == {"1": 3000.0}
    text = calls_report(own, floors, ["a", "b"], ncalls=ncalls)
    assert "per run" in text and "0.67 [0.67-0.67]" in text and "0.25 [0.25-0.25]" in text, text
    print("callback_ab selftest: ok")


def main(argv):
    if argv[1:] == ["--selftest"]:
        selftest()
        return 0
    if len(argv) == 7 and argv[1] == "--delta":
        for row in delta_rows(read_costs(argv[2]), read_costs(argv[3]), *argv[4:7]):
            print(*row, sep="\t")
        return 0
    calls_file = None
    if len(argv) >= 4 and argv[-2] == "--calls":
        calls_file, argv = argv[-1], argv[:-2]
    if len(argv) in (2, 3) and not argv[1].startswith("-"):
        with open(argv[1]) as f:
            data, builds = parse_tsv(f)
        if not builds:
            print(f"callback_ab: no measurements in {argv[1]}", file=sys.stderr)
            return 1
        ref = argv[2] if len(argv) == 3 else None
        print(report(data, builds, ref))
        if calls_file:
            with open(calls_file) as f:
                own, floors, ncalls = parse_calls(f)
            if not own:
                print(f"callback_ab: no per-call figures in {calls_file}", file=sys.stderr)
                return 1
            print(calls_report(own, floors, builds, ref, ncalls))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
