#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# `scx_esn top` for real on the host: no scheduler runs here (the kernel has
# no sched_ext), so top observes block I/O itself (observe mode). It runs in
# a tmux pane while fio reads a file of the disk under the build tree, and
# the screen is read back with capture-pane:
#   1. the node view says observe mode, no scheduler;
#   2. tab: the devices view shows the disk fio reads, with IOPS > 0;
#   3. tab: the tasks view lists fio, and that screen, captured with its
#      colours, is one scripts/render-screen.py draws (the docs' pictures);
#   4. p pauses (PAUSED shown), ? opens the help, + / - change the refresh;
#   5. a 20x5 window and back to 120x40: top is still running and draws;
#   6. q: top exits 0 and leaves the terminal (alternate screen closed).
#
# Usage: tests/host/top.sh   (root; needs tmux, fio)
# Environment: ESN_BIN (default target/release/scx_esn).
set -euo pipefail

source "$(dirname "$0")/lib.sh"
host_init top bin tmux fio
host_disk

file=$work/top-fio.dat
fio --name=layout --filename="$file" --size=64M --rw=write --bs=1M \
	--direct=1 --output=/dev/null

session=esn-top-$$
sock=$work/tmux-$$.sock
tmux_() { tmux -S "$sock" "$@"; }
screen() { tmux_ capture-pane -p -t "$session"; }
cleanup() {
	tmux_ kill-server 2>/dev/null || true
	[[ -n ${fio_pid:-} ]] && kill "$fio_pid" 2>/dev/null || true
	rm -f "$sock"
}
trap cleanup EXIT

# A failed check shows what top drew.
show_screen() {
	echo "---- screen ----"
	screen || true
	echo "----------------"
}
ON_FAIL=show_screen
# wait_screen SECONDS REGEX: until the pane shows REGEX.
wait_screen() {
	local until=$((SECONDS + $1))
	while ((SECONDS < until)); do
		screen 2>/dev/null | grep -Eq "$2" && return 0
		sleep 0.5
	done
	return 1
}

fio --name=top-host --filename="$file" --size=64M --direct=1 --rw=randread \
	--bs=4k --ioengine=psync --time_based --runtime=120 --output=/dev/null &
fio_pid=$!

# stderr to a file: log lines must not be mistaken for the screen.
tmux_ -f /dev/null new-session -d -s "$session" -x 120 -y 40 \
	"$bin top --interval 1 2>$work/top.err; echo TOP-EXIT=\$?; sleep 30"

ok=0
wait_screen 60 'observe mode' && ok=1
check "1 observe mode without a scheduler" "$ok" "$(screen | grep -m1 -o 'observe mode[^│]*' || echo 'not shown')"

tmux_ send-keys -t "$session" Tab
ok=0
# The disk's row with a non-zero IOPS figure after it.
wait_screen 20 "$disk +[0-9-]+ +[1-9][0-9.]*k?" && ok=1
check "2 devices view shows $disk with IOPS" "$ok" "$(screen | grep -m1 "$disk" | tr -s ' ' || echo "no $disk row")"

tmux_ send-keys -t "$session" Tab
ok=0
wait_screen 20 'fio' && ok=1
check "3 tasks view lists fio" "$ok" "$(screen | grep -m1 'fio' | tr -s ' ' || echo 'no fio row')"

# What top draws is what scripts/render-screen.py must draw for the docs.
tmux_ capture-pane -e -p -t "$session" >"$work/top-tasks.ansi"
ok=0
drawn=$(/usr/bin/python3 "$repo/scripts/render-screen.py" "$work/top-tasks.ansi" "$work/top-tasks.png" 2>&1) && ok=1
check "3b the screen with its colours draws as a PNG" "$ok" "$drawn"

tmux_ send-keys -t "$session" p
ok=0
wait_screen 10 'PAUSED' && ok=1
tmux_ send-keys -t "$session" p '?'
wait_screen 10 '[Hh]elp' || ok=0
tmux_ send-keys -t "$session" '?' + +
wait_screen 10 '0\.25 ?s' || ok=0
tmux_ send-keys -t "$session" - - -
wait_screen 10 '2(\.0+)? ?s' || ok=0
check "4 pause, help, refresh keys" "$ok" "PAUSED, help, 0.25 s after ++, 2 s after ---"

tmux_ resize-window -t "$session" -x 20 -y 5
sleep 2
small=$(screen)
tmux_ resize-window -t "$session" -x 120 -y 40
ok=0
wait_screen 10 'scx_esn' && ! screen | grep -q 'TOP-EXIT' && ok=1
check "5 survives a 20x5 window" "$ok" "at 20x5: $(echo "$small" | tr -s ' \n' ' ' | cut -c1-60)"

tmux_ send-keys -t "$session" q
ok=0
wait_screen 15 'TOP-EXIT=0' && ok=1
check "6 q exits 0" "$ok" "$(screen | grep -m1 -o 'TOP-EXIT=[0-9]*' || echo 'no exit')"

host_result
