#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh): sched_ext enabled and disabled again and again
# while fio runs, for tests/vm/flips.sh, which boots it many times to count
# how often the guest kernel dies of the TCG text-poke race (every enable and
# disable flips static keys, and the race strikes at such a flip).
#   F. ESN_FLIPS times (default 5): scx_esn --threshold 2 loads (enabled
#      within 60 s), fio runs 4 s under it, SIGINT unloads it (exit 0).
# Environment: ESN_FLIPS, ESN_BIN.
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

bin=${ESN_BIN:-$ESN_REPO/target/release/scx_esn}
flips=${ESN_FLIPS:-5}
dev=$(nvme_dev_on_node 1) || dev=
finish_all() { sched_kill; finish; }
[[ -b $dev ]] || { check "NVMe on node 1" 0 "none"; finish_all; }
fio_randread_args "$dev" 2 4

done_ok=0
for i in $(seq "$flips"); do
	if ! sched_start "$ESN_WORK/flip.out" "$ESN_WORK/flip.err" 60 "$bin" --threshold 2; then
		check "F flip $i: loads" 0 "$SCHED_WHY"
		break
	fi
	timeout 30 "${FIO[@]}" >/dev/null 2>&1
	stop_with_sigint "$sched_pid" 30
	sched_wait_exit 5
	if [[ ${SCHED_RC:-x} != 0 || $(sx_state) != disabled ]]; then
		check "F flip $i: unloads" 0 "exit ${SCHED_RC:-still running}, state $(sx_state)"
		break
	fi
	done_ok=$((done_ok + 1))
done
check "F enabled and disabled $flips times" "$([[ $done_ok == "$flips" ]] && echo 1 || echo 0)" \
	"$done_ok of $flips load/unload cycles under fio"
finish_all
