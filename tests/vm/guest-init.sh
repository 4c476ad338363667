#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Runs INSIDE the guest (started by run-in-vm.sh through virtme-ng --exec).
# Prepares the guest, writes OUTDIR/started, runs the guest script with its
# output in OUTDIR/log, and makes sure OUTDIR/result exists.
#
# usage: guest-init.sh OUTDIR GUEST_SCRIPT
# environment from run-in-vm.sh: ESN_KCONFIG, ESN_REPO, plus the caller's extras.
set -uo pipefail

outdir=$1
script=$2
prep="$outdir/prepare.log"

{
	echo "guest: $(uname -r) uptime $(cut -d' ' -f1 /proc/uptime) s"
	# Writable pseudo filesystems that the tests use.
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
	mountpoint -q /sys/kernel/debug || mount -t debugfs nodev /sys/kernel/debug
	mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
	# libbpf reads __kconfig values from /boot/config-$(uname -r). The guest sees
	# the host's /boot read-only; hide it under a tmpfs that has only our config.
	mount -t tmpfs -o mode=0755,size=16m esnboot /boot &&
		cp "$ESN_KCONFIG" "/boot/config-$(uname -r)"
	# The emulated NVMe controller on node 1.
	modprobe nvme || echo "guest: modprobe nvme failed"
	for _ in $(seq 1 100); do
		compgen -G '/sys/class/nvme/nvme*/nvme*n1' >/dev/null && break
		sleep 0.1
	done
	for b in /sys/class/nvme/nvme*/nvme*n1; do
		[[ -e /dev/$(basename "$b") ]] || echo "guest: no /dev node for $b"
	done
	ls /boot
	ls -d /sys/class/nvme/* 2>&1
	ulimit -l unlimited 2>/dev/null || true
} >"$prep" 2>&1

# run-in-vm.sh ESN_VM_TEST_RETRY=1: die like an early boot panic would.
if grep -qw esn_test_crash /proc/cmdline; then
	echo "guest-init: esn_test_crash: crashing the kernel on purpose" >/dev/kmsg
	echo 1 >/proc/sys/kernel/sysrq
	echo c >/proc/sysrq-trigger
fi

export ESN_OUTDIR=$outdir
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
# The repository is read-only in the guest; work in the guest-private /tmp.
cd /tmp || cd /

# The marker the host waits for: the guest came up and the test started.
cut -d' ' -f1 /proc/uptime >"$outdir/started"
sync

rm -f "$outdir/result"
bash "$script" >"$outdir/log" 2>&1
rc=$?

verdict=$(head -n1 "$outdir/result" 2>/dev/null || true)
if ((rc != 0)); then
	# A non-zero exit is a failure whatever the script wrote.
	[[ $verdict == PASS ]] && echo "guest-init: script wrote PASS but exited $rc" >>"$outdir/log"
	verdict=FAIL
elif [[ -z $verdict ]]; then
	verdict=PASS
fi
[[ $verdict == PASS || $verdict == FAIL ]] || verdict=FAIL
echo "$verdict" >"$outdir/result"
echo "$rc" >"$outdir/rc"
dmesg >"$outdir/dmesg.log" 2>&1
sync
exit 0
