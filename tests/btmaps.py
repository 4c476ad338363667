# SPDX-License-Identifier: GPL-2.0-only
"""Reads the maps that a bpftrace script printed, for the tests of scripts/*.bt.

    from btmaps import parse
    maps = parse(open(path).read())
    maps["bios"][("nvme0n1", 1, 0, "remote")]     -> 1234
    maps["usecs"][("nvme0n1", "local")]           -> {(16, 32): 10, ...}

A map printed more than once keeps its last printing. Keys are tuples of
ints and strings (a map without keys has the key ()); a histogram's value is
a dict from bucket bounds (low, high) to counts (high None: open-ended). The
same text is printed by bpftrace 0.17 to 0.27 in its default output mode.

CLI: python3 tests/btmaps.py FILE   prints the maps as JSON.
"""
import json
import re
import sys

_LINE = re.compile(r"^@(\w+)(?:\[(.*)\])?:\s*(.*)$")
_BUCKET = re.compile(r"^\[([^\]]*)[\])]\s+(\d+)\s+\|")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def _atom(text):
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _bound(text):
    text = text.strip()
    if not text or text == "...":
        return None
    m = re.fullmatch(r"(-?\d+)([KMGTP]?)", text)
    return int(m.group(1)) * _UNITS[m.group(2)] if m else text


def parse(text):
    maps = {}
    hist = None  # the dict receiving bucket lines, while inside a histogram
    for line in text.splitlines():
        b = _BUCKET.match(line)
        if hist is not None and b:
            parts = b.group(1).split(",")
            low = _bound(parts[0])
            high = _bound(parts[1]) if len(parts) > 1 else low
            hist[(low, high)] = int(b.group(2))
            continue
        hist = None
        m = _LINE.match(line)
        if not m:
            continue
        name, keys, value = m.groups()
        # Keys never contain ", " in these scripts (disk and task names).
        key = tuple(_atom(k) for k in keys.split(", ")) if keys is not None else ()
        table = maps.setdefault(name, {})
        if value == "":
            hist = table[key] = {}
        else:
            table[key] = _atom(value)
    return maps


def hist_count(h):
    return sum(h.values())


def hist_median(h):
    """The (low, high) bucket holding the median count; None if empty."""
    total, seen = hist_count(h), 0
    for bucket in sorted(h, key=lambda b: (b[0] is not None, b[0] or 0)):
        seen += h[bucket]
        if total and 2 * seen >= total:
            return bucket
    return None


def hist_mean(h):
    """The mean the buckets imply (each count at its bucket's middle, an
    open-ended bucket at its low bound); 0 if empty."""
    total = hist_count(h)
    if not total:
        return 0
    return sum(c * ((lo or 0) if hi is None else ((lo or 0) + hi) / 2)
               for (lo, hi), c in h.items()) / total


if __name__ == "__main__":
    out = {n: [[list(k), v if not isinstance(v, dict) else [[list(b), c] for b, c in v.items()]]
               for k, v in t.items()] for n, t in parse(open(sys.argv[1]).read()).items()}
    json.dump(out, sys.stdout, indent=1)
    print()
