#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh, ESN_VM_NET_LOOP=1): an NVMe over TCP disk goes
# by the node of the NIC its target is reached through. 2-node guest; two
# virtio NICs joined by a qemu hub (a wire): the initiator's, on node 1 (behind
# the NVMe's expander bridge), and the target's, on the root bus, moved into
# network namespace esn-tgt. The kernel's own NVMe target (nvmet-tcp, its
# port opened from inside esn-tgt) exports a null_blk disk; the initiator
# connects through /dev/nvme-fabrics, so every request crosses the wire.
#   T. `scx_esn topology --json`: the TCP disk's home is node 1, its source
#      "nvme-tcp to 10.77.0.2 via <the node-1 NIC>";
#   F. fio 2 jobs on the TCP disk, unpinned, ESN_FIO_RUNTIME seconds, under
#      EEVDF (reference) then scx_esn --threshold 2: bpftrace counts >= 90 %
#      of its bios from node 1 under scx_esn. The disk is a multipath head
#      (nvmet sets CMIC): its requests are issued on a hidden path disk
#      (nvme1c1n1) whose number no sysfs file shows; scx_esn names the path
#      to BPF (path_disk_dev). Before that, 0 of its requests were scored and
#      35-39 % of the bios came from node 1;
#   L. scx_esn still loaded, no sched_ext error in dmesg.
# Environment: ESN_BIN, ESN_SCHED_ARGS, ESN_LOAD_TIMEOUT (30), ESN_FIO_RUNTIME (15).
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

sched_script_vars
nqn=esn-fabrics-test
cfs=/sys/kernel/config/nvmet

finish_all() {
	echo "NVMe transports: $(cat /sys/class/nvme/*/transport 2>/dev/null | tr '\n' ' ')"
	sched_cleanup 20 'sched_ext|nvme|nvmet'
	finish
}

nic_with_mac() { # MAC
	local d
	for d in /sys/class/net/*; do
		[[ $(cat "$d/address" 2>/dev/null) == "$1" ]] && basename "$d" && return 0
	done
	return 1
}

say "fabrics test on $(uname -r); bin=$bin ${sched_args[*]}"
[[ -d /sys/kernel/sched_ext ]] || { check "sched_ext in the kernel" 0 "missing"; finish_all; }
[[ -x $bin ]] || { check "scx_esn binary" 0 "not found at $bin; run make first"; finish_all; }
for m in virtio_net nvme-tcp nvmet nvmet-tcp null_blk; do
	modprobe "$m" 2>>"$ESN_WORK/modprobe.log" || say "modprobe $m failed: $(tail -n1 "$ESN_WORK/modprobe.log")"
done
host_nic=$(nic_with_mac 52:54:00:e5:00:01) || host_nic=
tgt_nic=$(nic_with_mac 52:54:00:e5:00:02) || tgt_nic=
if [[ -z $host_nic || -z $tgt_nic ]]; then
	check "two NICs joined by a wire" 0 "host NIC '${host_nic}', target NIC '${tgt_nic}': boot with ESN_VM_NET_LOOP=1 (tests/vm/run.sh fabrics)"
	finish_all
fi
say "NICs: $host_nic (node $(cat "/sys/class/net/$host_nic/device/numa_node" 2>/dev/null ||
	cat "$(readlink -f "/sys/class/net/$host_nic/device")/../numa_node" 2>/dev/null)), target side $tgt_nic"

# ---- the wire and the target ---------------------------------------------------
ip netns add esn-tgt
ip link set "$tgt_nic" netns esn-tgt
ip addr add 10.77.0.1/24 dev "$host_nic"
ip link set "$host_nic" up
ip -n esn-tgt link set lo up
ip -n esn-tgt addr add 10.77.0.2/24 dev "$tgt_nic"
ip -n esn-tgt link set "$tgt_nic" up
for _ in $(seq 20); do ping -c1 -W1 10.77.0.2 >/dev/null 2>&1 && break; sleep 0.5; done
ping -c1 -W2 10.77.0.2 >/dev/null 2>&1 ||
	{ check "the wire carries packets" 0 "no ping reply from 10.77.0.2 over $host_nic"; finish_all; }

mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
[[ -b /dev/nullb0 ]] || { check "null_blk disk for the target" 0 "no /dev/nullb0"; finish_all; }
mkdir "$cfs/subsystems/$nqn"
echo 1 >"$cfs/subsystems/$nqn/attr_allow_any_host"
mkdir "$cfs/subsystems/$nqn/namespaces/1"
echo -n /dev/nullb0 >"$cfs/subsystems/$nqn/namespaces/1/device_path"
echo 1 >"$cfs/subsystems/$nqn/namespaces/1/enable"
mkdir "$cfs/ports/1"
echo tcp >"$cfs/ports/1/addr_trtype"
echo ipv4 >"$cfs/ports/1/addr_adrfam"
echo 10.77.0.2 >"$cfs/ports/1/addr_traddr"
echo 4420 >"$cfs/ports/1/addr_trsvcid"
# The port's listening socket opens in the namespace of whoever enables it
# (nsenter: `ip netns exec` would remount /sys and hide configfs).
nsenter --net=/run/netns/esn-tgt ln -s "$cfs/subsystems/$nqn" "$cfs/ports/1/subsystems/$nqn" ||
	{ check "nvmet-tcp target enabled" 0 "linking the subsystem to the port failed"; finish_all; }

before=$(ls /sys/class/nvme)
if ! echo "transport=tcp,traddr=10.77.0.2,trsvcid=4420,nqn=$nqn" >/dev/nvme-fabrics 2>"$ESN_WORK/connect.err"; then
	check "nvme-tcp connect" 0 "$(cat "$ESN_WORK/connect.err")"
	finish_all
fi
tcp_ctrl=
for c in /sys/class/nvme/nvme*; do
	[[ $(cat "$c/transport" 2>/dev/null) == tcp ]] && tcp_ctrl=$(basename "$c")
done
[[ -n $tcp_ctrl ]] || { check "nvme-tcp controller" 0 "none with transport tcp after connect"; finish_all; }
# Its namespace: a path disk nvme<S>c<C>n<N> under multipath (the disk users
# see is the head, nvme<S>n<N>), else nvme<C>n<N> itself.
ctrl_no=${tcp_ctrl#nvme} dev=
for _ in $(seq 40); do
	ns=$(ls -d "/sys/class/nvme/$tcp_ctrl"/nvme*n* 2>/dev/null | head -n1)
	if [[ -n $ns ]]; then
		ns=$(basename "$ns")
		dev=/dev/${ns/c${ctrl_no}n/n}
		[[ -b $dev ]] && break
	fi
	sleep 0.5
done
say "controllers before: $(echo "$before" | tr '\n' ' '); tcp controller ${tcp_ctrl:-none}; disk ${dev:-none}"
[[ -b $dev ]] || { check "NVMe/TCP disk appears" 0 "none after connect"; finish_all; }
say "address: $(cat "/sys/class/nvme/$tcp_ctrl/address" 2>/dev/null)"

# ---- T. the topology -------------------------------------------------------------
topo=$("$bin" topology --json 2>"$ESN_WORK/topology.err")
fig=$(python3 -c '
import json, sys
t = json.loads(sys.argv[1])
d = next((d for d in t["devices"] if d["name"] == sys.argv[2]), None)
if d is None:
    print(0, "no", sys.argv[2], "in", [x["name"] for x in t["devices"]])
else:
    ok = d.get("home_node") == 1 and ("nvme-tcp to 10.77.0.2 via " + sys.argv[3]) in d.get("node_source", "")
    print(int(ok), "%s: home node %s (%s)" % (d["name"], d.get("home_node"), d.get("node_source")))' \
	"$topo" "$(basename "$dev")" "$host_nic" 2>&1 || echo "0 topology --json failed: $(tail -n2 "$ESN_WORK/topology.err")")
check "T NVMe/TCP disk: home node 1, by the NIC its target is reached through" "${fig%% *}" "${fig#* }"

# ---- F. fio on it ------------------------------------------------------------------
fio_randread_args "$dev" 2 "$runtime"
bio_trace_start "$dev" || { check "bpftrace attaches" 0 "no marker"; finish_all; }
MB_SKIP=2 measure_bios_during $((runtime + 60)) -- "${FIO[@]}" || finish_all
ref="EEVDF $MB_PCT1 % of $MB_TOTAL"
if ! sched_start "$sched_out" "$sched_err" "$load_timeout" "$bin" "${sched_args[@]}"; then
	check "scx_esn loads" 0 "$SCHED_WHY"
	finish_all
fi
grep -m1 "device $(basename "$dev")" "$sched_err" | sed 's/^/    /'
MB_SKIP=2 measure_bios_during $((runtime + 60)) -- "${FIO[@]}" || finish_all
ok=0
pct_ge "$MB_PCT1" 90 && ((MB_RC == 0)) && ok=1
check "F fio on the NVMe/TCP disk: >= 90 % of the bios from node 1" "$ok" \
	"scx_esn $MB_PCT1 % of $MB_TOTAL, fio exit $MB_RC; $ref; requests scx_esn scored: $(grep -o 'io_scored=[0-9]*' "$sched_out" | awk -F= '{ s += $2 } END { print s + 0 }')"

check_still_loaded
echo 1 >"/sys/class/nvme/$tcp_ctrl/delete_controller" 2>/dev/null
finish_all
