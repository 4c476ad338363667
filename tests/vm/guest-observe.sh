#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh): `scx_esn observe` alone, for kernels without
# sched_ext (make test boots Debian 12's own 6.1 kernel for it: no
# block_io_start there, so requests start at block_rq_insert or at issue).
#   - observe loads and picks the hooks this kernel has;
#   - fio pinned to node 0's CPUs: >= 95 % of the NVMe's requests remote;
#     pinned to node 1's: >= 95 % local;
#   - its request count within 5 % of bpftrace's independent bio count, and
#     fio the top task;
#   - the verifier's processed instructions per program (bpftool), reported;
#   - the total report carries each node's CPU energy (the model, labelled
#     estimated, within 14-95 W per node) and the energy per I/O.
# Environment: ESN_FIO_RUNTIME (s, default 10).
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

runtime=${ESN_FIO_RUNTIME:-10}
limit=$((runtime + 60))

say "observe on $(uname -r)"
dev=$(nvme_dev_on_node 1) || dev=
check "nvme0 on node 1" "$([[ -b $dev ]] && echo 1 || echo 0)" "dev=${dev:-none}"
[[ -b $dev ]] || finish

if ! bio_trace_start "$dev"; then
	check "bpftrace attaches" 0 "no marker within ${ESN_BT_ATTACH_TIMEOUT}s"
	finish
fi

fio_randread_args "$dev" 1 "$runtime"
for run in "0-1 remote" "2-3 local"; do
	read -r cpus want <<<"$run"
	if ! observe_start "$dev"; then
		check "observe starts (pinned $cpus)" 0 "$(tail -n3 "$OBS_ERR" | tr '\n' ' ')"
		continue
	fi
	hooks=$(grep -o 'tracking requests from [a-z_]*' "$OBS_ERR" | sed 's/.* //')
	[[ $want == remote ]] && verifier_report "$OBS_PID" observe
	measure_bios_during "$limit" -- taskset -c "$cpus" "${FIO[@]}"
	observe_stop || true
	pct=$OBS_REMOTE_PCT
	[[ $want == local ]] && pct=$(awk -v p="$OBS_REMOTE_PCT" 'BEGIN { print (p < 0) ? -1 : 100 - p }')
	ok=0
	[[ $OBS_RC == 0 ]] && pct_ge "$pct" 95 && ok=1
	check "observe pinned $cpus: >= 95 % of requests $want" "$ok" \
		"$pct % of $OBS_REQS (start hook $hooks); latency $OBS_LAT; $OBS_NODES"
	ok=$(awk -v a="$OBS_REQS" -v b="$MB_TOTAL" 'BEGIN { d = a - b; if (d < 0) d = -d; print (b > 100 && d <= 0.05 * b) ? 1 : 0 }')
	check "observe pinned $cpus: requests within 5 % of bpftrace's bios" "$ok" \
		"observe $OBS_REQS, bpftrace $MB_TOTAL"
	top=$(python3 -c '
import json, sys
t = [json.loads(l) for l in open(sys.argv[1]) if l.strip() and "\"total\"" in l][0]
print(t["tasks"][0]["comm"] if t["tasks"] else "-")' "$OBS_OUT" 2>/dev/null || echo -)
	check "observe pinned $cpus: top task is fio" "$([[ $top == fio ]] && echo 1 || echo 0)" "top: $top"
done

# The energy meter runs without the scheduler: the model here (no RAPL in a
# VM), per node, within its watts (14 W deepest idle to 95 W busy per node).
energy=$(python3 -c '
import json, sys
t = [json.loads(l) for l in open(sys.argv[1]) if l.strip() and "\"total\"" in l][0]
e = t.get("energy") or {}
ns = e.get("nodes", [])
ok = e.get("source") == "estimated" and len(ns) == 2 and all(14 <= n["watts"] <= 95 for n in ns) \
    and (e.get("joules_per_io") or 0) > 0
print(int(ok), "%s: %s; total %.1f W, %.3f mJ per I/O" % (e.get("source"),
    ", ".join("node %d %.1f W" % (n["node"], n["watts"]) for n in ns), e.get("watts", 0),
    1e3 * (e.get("joules_per_io") or 0)))' "$OBS_OUT" 2>/dev/null || echo "0 no energy in the total report")
check "observe: energy per node in the total report" "${energy%% *}" "${energy#* }"

bio_trace_stop
finish
