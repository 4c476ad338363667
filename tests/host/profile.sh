#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `scx_esn profile` on the host, for real: fio reads a file of the disk under
# the build tree with 1..2 jobs. This host has one NUMA node, so the NUMA
# penalty cannot be measured and the prior must be said to be used. Checks:
#   - exit 0, one row per job count with IOPS > 0, P_cont(1) = 1.00, with a
#     --file path holding a colon (which fio takes as a list unless escaped);
#   - the summary names the prior and a balance point within 1..2;
#   - --save writes a state file whose node threshold is that balance point;
#   - an unknown device and an absurd --numa-penalty fail with a message,
#     and the state file is left as it was.
# The two-node case (remote runs, measured penalty) is in tests/vm/guest-control.sh.
#
# Usage: tests/host/profile.sh   (root; needs fio and python3)
# Environment: ESN_BIN (default target/release/scx_esn).
set -euo pipefail

source "$(dirname "$0")/lib.sh"
host_init profile bin fio python3
host_disk
state=$work/profile-state.json
out=$work/profile.out
rm -f "$state"

fail=0
check() { # NAME OK FIGURE
	if [[ $2 == 1 ]]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; fail=1; fi
}

echo "profile host test: disk $disk, file $work/profile:a.dat (a colon: fio must get it escaped)"
rc=0
"$bin" profile --device "$disk" --file "$work/profile:a.dat" --file-size-mb 128 \
	--max-jobs 2 --runtime 2 --save --state-file "$state" >"$out" 2>"$work/profile.err" || rc=$?
sed 's/^/    /' "$out"
verdict=$(python3 - "$out" "$state" "$rc" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+([\d.]+)\s+-\s+-\s+([\d.]+)\s+-$", text, re.M)
summary = re.search(r"^P_numa ([\d.]+) \((\w+)\); balance point n\* = (\d+)", text, re.M)
ok = (sys.argv[3] == "0" and [r[0] for r in rows] == ["1", "2"]
      and all(int(r[1]) > 0 for r in rows) and rows[0][3] == "1.00"
      and summary is not None and summary.group(2) == "prior" and summary.group(1) == "1.30"
      and 1 <= int(summary.group(3)) <= 2)
saved = "-"
try:
    saved = json.load(open(sys.argv[2]))["nodes"][0]["threshold"]
except Exception as e:
    ok = False
ok = ok and summary is not None and saved == int(summary.group(3))
print(int(ok), f"exit {sys.argv[3]}, rows {rows}, summary {summary.group(0) if summary else None!r}, saved threshold {saved}")
PY
)
check "profile sweep, prior, saved" "${verdict%% *}" "${verdict#* }"

before=$(sha256sum "$state" | cut -d' ' -f1)
rc=0
msg=$("$bin" profile --device no-such-disk --save --state-file "$state" 2>&1) || rc=$?
ok=0
[[ $rc == 1 && $msg == *"no disk named"*"$disk"* ]] && ok=1
check "unknown device: error listing the disks" "$ok" "exit $rc: $msg"
rc=0
msg=$("$bin" profile --device "$disk" --numa-penalty 0.5 2>&1) || rc=$?
ok=0
[[ $rc == 2 && $msg == *numa-penalty* ]] && ok=1
check "--numa-penalty 0.5 refused" "$ok" "exit $rc: $(head -n1 <<<"$msg")"
ok=0
[[ $(sha256sum "$state" | cut -d' ' -f1) == "$before" ]] && ok=1
check "state file untouched by the failures" "$ok" "sha256 ${before:0:12}"

exit "$fail"
