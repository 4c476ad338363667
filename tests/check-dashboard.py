#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Does a Grafana dashboard ask only for what scx_esn's /metrics serves?

usage: tests/check-dashboard.py DASHBOARD.json SCRAPE.txt

SCRAPE.txt is one live scrape of `scx_esn --prometheus` (OpenMetrics text).
Every PromQL query of the dashboard (panels, rows, template variables) is
checked:
  - each scx_esn_* name it uses is a series the scrape has, or a family the
    scrape declares (# TYPE) with that series' suffix (_total, _bucket, ...);
  - each label it matches with = (but instance/job, which Prometheus adds)
    exists on that metric in the scrape with that value, when the scrape
    has samples of it;
  - each label it aggregates by (`by (...)`) exists on one of its metrics.
Then, so that the check is known to be able to fail, it is run again once
per metric family the dashboard uses, with that family taken out of the
scrape, and must complain each time.
Exit 0 and a summary line when all holds; 1 with one line per problem.
"""
import json
import re
import sys

SCRAPE_LABELS = {"instance", "job"}
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created", "")
NAME = re.compile(r"\bscx_esn_[a-z0-9_]+")
SELECTOR = re.compile(r"\b(scx_esn_[a-z0-9_]+)\s*\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
BY = re.compile(r"\bby\s*\(([^)]*)\)")


def parse_scrape(text):
    """(families declared by # TYPE, {series name: [label dicts]})."""
    families, series = set(), {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            families.add(line.split()[2])
        elif line and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][\w:]*)(\{(.*)\})?\s", line)
            if m:
                labels = dict((k, v) for k, _, v in MATCHER.findall(m.group(3) or ""))
                series.setdefault(m.group(1), []).append(labels)
    return families, series


def queries(dashboard):
    """(where, PromQL) for every query of the dashboard."""
    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    yield f"panel {p.get('title')!r} {t.get('refId')}", t["expr"]
            yield from walk(p.get("panels", []))
    yield from walk(dashboard.get("panels", []))
    for v in dashboard.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") == "query" and q:
            yield f"variable {v.get('name')!r}", q


def family_of(name, families):
    for suffix in SUFFIXES:
        if suffix and name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return name if name in families else None


def check(dashboard, families, series):
    problems, names = [], set()
    for where, expr in queries(dashboard):
        used = set(NAME.findall(expr))
        names |= used
        for name in sorted(used):
            if name not in series and family_of(name, families) is None:
                problems.append(f"{where}: {name} is not in the scrape")
        for name, body in SELECTOR.findall(expr):
            for label, op, value in MATCHER.findall(body):
                if label in SCRAPE_LABELS or op != "=" or name not in series:
                    continue
                if not any(s.get(label) == value for s in series[name]):
                    problems.append(f"{where}: no {name} sample has {label}=\"{value}\"")
        for group in BY.findall(expr):
            for label in (l.strip() for l in group.split(",") if l.strip()):
                if label in SCRAPE_LABELS:
                    continue
                if not any(label in s for n in used for s in series.get(n, [])):
                    problems.append(f"{where}: by ({label}): no metric of the query has that label")
    return problems, names


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    with open(sys.argv[1]) as f:
        dashboard = json.load(f)
    with open(sys.argv[2]) as f:
        scrape = f.read()
    families, series = parse_scrape(scrape)
    problems, names = check(dashboard, families, series)
    n_queries = sum(1 for _ in queries(dashboard))
    if not n_queries:
        problems.append("the dashboard has no query")
    # Each family taken out must be noticed, or the check proves nothing.
    used = sorted({family_of(n, families) or n for n in names})
    for family in used:
        kept = "\n".join(line for line in scrape.splitlines()
                         if family_of(NAME.search(line).group(0) if NAME.search(line) else "",
                                      families) != family)
        if not check(dashboard, *parse_scrape(kept))[0]:
            problems.append(f"self-check: with {family} gone from the scrape, nothing was noticed")
    for p in problems:
        print(f"FAIL {p}")
    if problems:
        return 1
    print(f"dashboard ok: {n_queries} queries, {len(names)} series names of {len(used)} "
          f"metric families, all in the scrape ({len(series)} series names there); "
          f"taking out any one of the {len(used)} families is noticed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
