#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Bad input to the real binary on the host, each case: the documented exit
# status (2 a bad command line, 1 a runtime refusal), one line on stderr that
# names the problem, no panic, nothing written to stdout, and nothing left
# behind (no state file, no stats socket, no BPF program of ours loaded).
# This host's kernel has no sched_ext: loading the scheduler must say so. The
# refusals that need a sched_ext kernel (another scheduler loaded, the stats
# socket's permissions, a port in use, not root) are in tests/vm/guest-edges.sh.
# Also: `observe -vv` works like `scx_esn -vv observe` (libbpf's debug lines).
#
# Usage: tests/host/bad-input.sh   (root)
# Environment: ESN_BIN (default target/release/scx_esn).
set -euo pipefail

source "$(dirname "$0")/lib.sh"
host_init bad-input bin
state=$work/bad-input-state/learned.json
rm -rf "$(dirname "$state")"

fail=0 cases=0
check() { # NAME OK FIGURE
	cases=$((cases + 1))
	if [[ $2 == 1 ]]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; fail=1; fi
}

our_progs() { # BPF programs loaded (bpftool when present)
	if command -v bpftool >/dev/null; then
		bpftool prog show 2>/dev/null | grep -cE '^[0-9]+:' || true
	else
		echo 0
	fi
}
progs_before=$(our_progs)

# bad WANT_RC PATTERN ARGS...: scx_esn ARGS is refused as documented.
bad() {
	local want=$1 pattern=$2 rc=0 err out lines ok=0
	shift 2
	out=$(timeout 30 "$bin" "$@" 2>"$work/bad-input.err") || rc=$?
	err=$(cat "$work/bad-input.err")
	lines=$(grep -c . <<<"$err" || true)
	if [[ $rc == "$want" && $lines == 1 && $err == *"$pattern"* && $err == "scx_esn: "* &&
		$err != *panicked* && -z $out ]]; then
		ok=1
	fi
	check "scx_esn $*" "$ok" "exit $rc (want $want), $lines line(s): $err"
}

# A bad command line: exit 2.
bad 2 "--threshold" --threshold 0
bad 2 "--threshold" --threshold -3
bad 2 "--threshold" --threshold many
bad 2 "--threshold" --threshold 99999999999
bad 2 "--numa-penalty" --numa-penalty 0.5
bad 2 "--numa-penalty" --numa-penalty 11
bad 2 "--numa-penalty" --numa-penalty -1
bad 2 "--prometheus" --prometheus not-an-address
bad 2 "--prometheus" --prometheus 127.0.0.1:99999
bad 2 "--stats" --json
bad 2 "--state-file" --no-state --state-file "$state"
bad 2 "--state-file" --threshold 2 --state-file "$state"
bad 2 "does nothing with \`observe\`" --threshold 3 observe
bad 2 "does nothing with \`topology\`" --stats 1 topology
bad 2 "cannot be used with" --monitor 1 --prometheus 9100
bad 2 "does nothing with --monitor" --monitor 1 --slice-us 200
bad 2 "--slice-us" --slice-us 5
bad 2 "unrecognized subcommand" obsrve
bad 2 "--device" profile
# A runtime refusal: exit 1, before anything is loaded.
bad 2 "--stats" --stats 0
bad 2 "--interval" observe --interval -1
bad 2 "--duration" observe --duration 1e30
bad 1 "no such group" --stats-group no-such-group-here
if [[ -d /sys/kernel/sched_ext ]]; then
	echo "note: this kernel has sched_ext; the no-sched_ext case is not tried"
else
	bad 1 "this kernel has no sched_ext" --state-file "$state" --stats 1 --prometheus 9464
	left=$({ ls -A "$(dirname "$state")" 2>/dev/null || true; } | wc -l)
	socket=$([[ -e /var/run/scx/root/stats ]] && echo present || echo none)
	progs=$(our_progs)
	ok=0
	[[ $left == 0 && $progs == "$progs_before" ]] && ok=1
	check "no sched_ext: nothing left behind" "$ok" \
		"files by the state file: $left; stats socket: $socket; our BPF programs $progs_before -> $progs"
	# The port of that attempt was never bound.
	ok=1
	if command -v ss >/dev/null && ss -ltn | grep -q ':9464 '; then ok=0; fi
	check "no sched_ext: no port left bound" "$ok" "127.0.0.1:9464"
fi
bad 1 "no disk named" profile --device no-such-disk
bad 1 "no such disk" observe --device no-such-disk --duration 1

# top as a user who may not read the stats socket: told so at once, exit 1
# (a root-only socket stands in for a running scheduler's).
sock=$work/bad-input-stats.sock
rm -f "$sock"
python3 -c 'import os, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o600); s.listen()
time.sleep(60)' "$sock" &
holder=$!
for _ in $(seq 50); do [[ -S $sock ]] && break; sleep 0.1; done
rc=0
err=$(timeout 20 setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" top --socket "$sock" 2>&1) || rc=$?
kill "$holder" 2>/dev/null || true
ok=0
[[ $rc == 1 && $err == "scx_esn: permission denied on $sock: run as root"* ]] && ok=1
check "scx_esn top on a socket not ours (as nobody)" "$ok" "exit $rc: $err"

# observe -vv: the global option after the subcommand, with libbpf's debug
# lines, exactly as many as `scx_esn -vv observe` prints.
debug_lines() { # ARGS...: exit status and debug lines of one short observe run
	local rc=0
	"$bin" "$@" >/dev/null 2>"$work/observe-v.err" || rc=$?
	echo "$rc $(grep -c '\[DEBUG\]' "$work/observe-v.err" || true)"
}
after=$(debug_lines observe -vv --duration 1 --interval 1)
before=$(debug_lines -vv observe --duration 1 --interval 1)
ok=0
[[ ${after%% *} == 0 && ${after#* } -gt 0 && $after == "$before" ]] && ok=1
check "scx_esn observe -vv == scx_esn -vv observe" "$ok" \
	"exit and debug lines: after the subcommand $after, before it $before"

echo "bad-input host test: $cases cases"
if ((fail)); then
	echo "bad-input host test: FAIL"
	exit 1
fi
echo "bad-input host test: PASS"
