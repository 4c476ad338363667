#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (tests/vm/run-in-vm.sh) of the NUMA benchmark: runs
# guest_bench.py (the matrix; see its docstring) and passes when it finished
# and at least one point per scheduler succeeded. BENCH_* come from
# numa-bench.sh.
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

export ESN_WORK
python3 "$ESN_REPO/tests/bench/guest_bench.py"
rc=$?
raw=${BENCH_RAW:?}
ok=0 verdict="0 guest_bench.py exited $rc before it could judge the points"
if ((rc == 0)) && [[ -s $raw ]]; then
	verdict=$(python3 - "$raw" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
meta = next(l for l in lines if l["kind"] == "meta")
points = [l for l in lines if l["kind"] == "point"]
ok_by = {s: sum(p["ok"] for p in points if p["sched"] == s) for s in meta["schedulers"]}
missing = [s for s, n in ok_by.items() if n == 0]
fails = [p for p in points if not p["ok"]]
print(int(not missing and any(l["kind"] == "end" for l in lines)),
      f"{len(points) - len(fails)} of {len(points)} points ok; per scheduler {ok_by}"
      + (f"; NO successful point: {missing}" if missing else "")
      + "".join(f"; FAILED {p['penalty']} {p['load']} {p['sched']}: {p.get('error', '')[:160]}" for p in fails[:5]))
PY
)
	ok=${verdict%% *}
fi
check "bench: every scheduler measured" "$ok" "${verdict#* }"
check "bench: guest_bench.py exit" "$((rc == 0))" "exit $rc"
finish
