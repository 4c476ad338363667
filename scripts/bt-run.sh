#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Runs one of the bpftrace scripts of this directory with the variant that
# this bpftrace and this kernel can run, or says in one line what is missing
# (instead of bpftrace's parser or attach errors).
#
# usage: scripts/bt-run.sh NAME [bpftrace options...]
#   NAME: nvme-locality | blk-lat-node | io-task-migrations | iowait-runq |
#         esn-decisions
#   e.g.  scripts/bt-run.sh nvme-locality          (Ctrl-C prints the report)
#         timeout -s INT 30 scripts/bt-run.sh blk-lat-node
# Environment: BPFTRACE, the bpftrace to run (default: bpftrace on PATH).
# Exit status: bpftrace's; 3 if something the script needs is missing.
#
# Choices:
#   - nvme-locality and blk-lat-node need the bio or request pointer: raw
#     tracepoints (bpftrace >= 0.18) run scripts/NAME.bt; bpftrace 0.17 runs
#     scripts/bpftrace-0.17/NAME.bt, which needs kprobes instead.
#   - bpftrace >= 0.25 resolves probes through available_filter_functions;
#     where that file is not readable (seen: root without full capabilities)
#     the kernel's text symbols are handed to it with --traceable-functions.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bt=${BPFTRACE:-bpftrace}
tracefs=/sys/kernel/tracing

missing() { echo "bt-run: $name: $*" >&2; exit 3; }

(($# >= 1)) || { sed -n '8,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
name=${1%.bt}
name=${name##*/}
shift
case $name in
nvme-locality | blk-lat-node | io-task-migrations | iowait-runq | esn-decisions) ;;
*) echo "bt-run: unknown script '$name'" >&2; exit 2 ;;
esac

ver=$("$bt" --version 2>/dev/null | sed -n 's/.*v\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p')
[[ -n $ver ]] || missing "cannot run '$bt --version': is bpftrace installed? (Debian: apt-get install bpftrace)"
read -r major minor <<<"$ver"
minor_ver=$((major * 100 + minor))

[[ -r /sys/kernel/btf/vmlinux ]] || missing "the kernel has no BTF (/sys/kernel/btf/vmlinux): the scripts read kernel structures through it (CONFIG_DEBUG_INFO_BTF=y)"
if [[ ! -d $tracefs/events ]]; then
	mount -t tracefs nodev "$tracefs" 2>/dev/null
	[[ -d $tracefs/events ]] || missing "tracefs is not mounted at $tracefs (mount -t tracefs nodev $tracefs)"
fi

have_event() { [[ -d $tracefs/events/$1 ]]; }
have_func() { grep -qE " [tT] $1\$" /proc/kallsyms; }
have_kprobes() { [[ -e $tracefs/kprobe_events || -d /sys/bus/event_source/devices/kprobe ]]; }

need_events() {
	local e
	for e in "$@"; do
		have_event "$e" || missing "the kernel has no tracepoint $e"
	done
}
need_kprobes() { # WHY FUNCTION-REGEX...
	local why=$1 f
	shift
	have_kprobes || missing "$why needs kprobes, and this kernel has none (no $tracefs/kprobe_events, no kprobe PMU)"
	for f in "$@"; do
		have_func "$f" || missing "$why: the kernel has no function matching '$f'"
	done
}

script=$here/$name.bt
case $name in
nvme-locality | blk-lat-node)
	need_events block/block_bio_queue block/block_rq_issue block/block_rq_complete
	if ((minor_ver < 18)); then
		script=$here/bpftrace-0.17/$name.bt
		if [[ $name == nvme-locality ]]; then
			need_kprobes "bpftrace $major.$minor has no raw tracepoints; its variant" submit_bio_noacct
		else
			need_kprobes "bpftrace $major.$minor has no raw tracepoints; its variant" blk_mq_start_request
		fi
	fi
	;;
io-task-migrations | iowait-runq)
	need_events sched/sched_switch sched/sched_wakeup sched/sched_migrate_task block/block_bio_queue
	;;
esn-decisions)
	[[ -d /sys/kernel/sched_ext ]] || missing "the kernel has no sched_ext (/sys/kernel/sched_ext): scx_esn cannot run here"
	need_events sched/sched_switch block/block_bio_queue
	need_kprobes "esn-decisions" htab_map_update_elem htab_map_delete_elem \
		'(__)?scx_bpf_dsq_insert[_a-z0-9]*' 'scx_bpf_dsq_move_to_local[_a-z0-9]*'
	state=$(cat /sys/kernel/sched_ext/state 2>/dev/null)
	ops=$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)
	echo "bt-run: sched_ext state: ${state:-?}${ops:+, ops $ops}" >&2
	;;
esac

opts=()
if ((minor_ver >= 25)) && ! head -c1 "$tracefs/available_filter_functions" >/dev/null 2>&1; then
	# One file per kernel, rewritten whole each time and renamed into place:
	# bpftrace replaces this shell (exec), so nothing would remove a
	# per-run temporary file.
	list=${TMPDIR:-/tmp}/bt-run-functions.$(uname -r)
	awk '$2 ~ /^[tT]$/ && $3 !~ /^__pfx_/ { print $3 ($4 != "" ? " " $4 : "") }' \
		/proc/kallsyms >"$list.$$" && mv -f "$list.$$" "$list" || exit 1
	opts=(--traceable-functions "$list")
	echo "bt-run: $tracefs/available_filter_functions is not readable; using the text symbols of /proc/kallsyms" >&2
fi

echo "bt-run: bpftrace $major.$minor: ${script#"$here"/}" >&2
# exec: signals (Ctrl-C, timeout -s INT) reach bpftrace itself.
exec "$bt" "${opts[@]}" "$@" "$script"
