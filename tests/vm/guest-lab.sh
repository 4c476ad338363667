#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Guest script (run-in-vm.sh, 2n): the NUMA lab (tests/lab/remote-penalty)
# gives remote block I/O the cost it has on real hardware, and every observer
# sees it. Under EEVDF, one fio job (4k randread, psync) pinned to node 0
# (remote to the NVMe) and to node 1 (local), alternating; fio's own mean
# completion latency is the referee, and a "ratio" is the median over the
# rounds of remote / local (fio_clat_pair):
#   O. lab off: remote / local within 1.0 +- 10 % (a second measurement
#      allowed, judged with the first's rounds: the median of all ten);
#   F. --factor 2.0: remote / local within 2.0 +- 15 % (a second calibration
#      allowed, both reported); the lab delayed as
#      many requests as fio issued from node 0 and none of node 1's;
#   U. --us 300 on the block_rq_issue fallback: the lab's mean spin is at
#      least 300 us (a spin is never short), at most a quarter of the spins run
#      more than 10 % over (the guest's timer tick and a host that preempts the
#      vCPU make some spins long: 4.9 % on a quiet host, and enough to lift the
#      mean by 15 % on a loaded CI machine; a wrong spin makes them all long),
#      and fio sees remote - local >= 270 us, by the median over rounds of
#      the two sides' p50 (a second measurement allowed, both reported);
#   N. scx_esn (learning, no state) running, then --factor 2.0 calibrated
#      under it; one fio job flipped between the nodes every 0.5 s: the
#      controller's measured P_numa for node 1 (mean device latency, remote
#      over local) reads at least 1.6;
#   Z. the lab exits 0 on SIGINT and leaves nothing attached: bpftool lists
#      none of its programs, and the pinned ratio after it is back within
#      1.0 +- 15 % (judged as O).
# Environment: ESN_LAB_ROUNDS (5), ESN_LAB_SECS (3) per side and round.
set -uo pipefail
# shellcheck source=tests/vm/guest-lib.sh
. "${ESN_REPO:?}/tests/vm/guest-lib.sh"

bin=${ESN_BIN:-$ESN_REPO/target/release/scx_esn}
rounds=${ESN_LAB_ROUNDS:-5}
secs=${ESN_LAB_SECS:-3}
remote_cpus=0-1 local_cpus=2-3

cleanup() { lab_stop; sched_kill; }
trap cleanup EXIT

dev=$(nvme_dev_on_node 1) || { check "NVMe on node 1" 0 "none found"; finish; }
say "device $dev on node 1; remote CPUs $remote_cpus, local $local_cpus"

# settled_ratio LO HI: with nothing attached, the pinned remote / local ratio
# lies in [LO, HI]. A second measurement is allowed, both reported: one read
# 0.897 (rounds 1.00 0.87 1.03 0.90 0.86) on a machine where the other runs
# of the day read 0.980-1.088; a host burst decides one pair. The second is
# judged by the median of all ten rounds, not its own five: a round's ratio
# spreads 0.77-1.50 under TCG with nothing attached, so a five-round median
# lands outside the window one time in a few (2026-12-06: O read 1.146, then
# 0.894, where the ten rounds' median read 0.99 and the pooled means 1.003;
# the fresh-clone CI's Z read 1.226 from rounds 0.85 1.23 1.50 1.29 0.94).
# Sets SETTLED_OK, SETTLED_RATIO, SETTLED_ROUNDS and SETTLED_TRIES (arrays).
settled_ratio() {
	local lo=$1 hi=$2 more
	SETTLED_OK=0 SETTLED_RATIO=0 SETTLED_TRIES=() SETTLED_ROUNDS=()
	for _ in 1 2; do
		fio_clat_pair "$dev" "$local_cpus" "$remote_cpus" "$rounds" "$secs"
		read -r -a more <<<"$PAIR_ROUNDS"
		SETTLED_ROUNDS+=("${more[@]}")
		SETTLED_RATIO=$(printf '%s\n' "${SETTLED_ROUNDS[@]}" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
		SETTLED_TRIES+=("$SETTLED_RATIO")
		within "$SETTLED_RATIO" "$lo" "$hi" && { SETTLED_OK=1; return 0; }
	done
}

# ---- O. lab off --------------------------------------------------------------
# A first short run, not judged: the first fio of a boot pays for loading fio
# over 9p and warming the guest.
fio_randread_args "$dev" 1 2 >/dev/null
"${FIO[@]}" >>"$ESN_WORK/commands.log" 2>&1
settled_ratio 0.9 1.1
check "O lab off: remote/local clat within 1.0 +-10 %" "$SETTLED_OK" \
	"ratio $SETTLED_RATIO (median of ${#SETTLED_ROUNDS[@]} rounds: ${SETTLED_ROUNDS[*]}; last measurement local $PAIR_LOCAL_US us, remote $PAIR_REMOTE_US us; measurements: ${#SETTLED_TRIES[@]}, medians so far ${SETTLED_TRIES[*]})"
off_local=$PAIR_LOCAL_US

# ---- F. --factor 2.0 -----------------------------------------------------------
# The lab calibrates from its own reads (lab off, then 3 passes with the spin
# on, a line fitted through them); under TCG on a shared host a calibration
# can still be off by more than the window (CI, before the passes:
# 1.646 after a probe read 2.34x at 397 us and local latency rose 15 % after
# it). One more calibration is allowed; both attempts are reported.
ok=0 f_tries=() f_seen=
for _ in 1 2; do
	lab_start --factor 2.0 || break
	fio_clat_pair "$dev" "$local_cpus" "$remote_cpus" "$rounds" "$secs"
	lab_stop
	f_tries+=("$PAIR_RATIO")
	within "$PAIR_RATIO" 1.7 2.3 && { ok=1; break; }
done
if ((${#f_tries[@]})); then
	check "F --factor 2.0: remote/local clat within 2.0 +-15 %" "$ok" \
		"ratio $PAIR_RATIO (rounds $PAIR_ROUNDS; local $PAIR_LOCAL_US us, remote $PAIR_REMOTE_US us; calibrations: ${#f_tries[@]}, ratios ${f_tries[*]}); $LAB_LINE"
	# fio's I/Os are all the NVMe saw; the lab counts requests (one per 4k read).
	ok=0
	((LAB_RC == 0)) && within "$LAB_REMOTE" "$((PAIR_REMOTE_IOS * 99 / 100))" "$((PAIR_REMOTE_IOS * 101 / 100 + 5))" &&
		within "$LAB_LOCAL" "$((PAIR_LOCAL_IOS * 99 / 100))" "$((PAIR_LOCAL_IOS * 101 / 100 + 5))" && ok=1
	check "F the lab delayed exactly the remote requests" "$ok" \
		"delayed $LAB_REMOTE (fio remote I/Os $PAIR_REMOTE_IOS), mean $LAB_MEAN_US us; local seen $LAB_LOCAL (fio local I/Os $PAIR_LOCAL_IOS); exit $LAB_RC"
	# The share of its spin fio saw here (remote - local p50 over the mean
	# spin): U's yardstick, see there.
	((ok)) && f_seen=$(awk -v e="$PAIR_P50_EXTRA_US" -v s="$LAB_MEAN_US" \
		'BEGIN { if (s > 0) printf "%.3f", e / s }')
else
	check "F lab --factor 2.0 starts" 0 "$LAB_LINE"
fi

# ---- U. --us 300 on the tracepoint fallback -------------------------------------
# 4 rounds, two of each order: with 2, one slow local round (a round's ratio
# varies by 3-4 % under TCG, about 10 us of a 300 us clat) put fio's remote -
# local at 262.8 us against a 304.6 us mean spin (CI of 2026-11-26). On a
# busier host the rounds vary far more (CI of 2026-12-02: the lab-off pairs of
# the same boot 0.71-1.26, local clat 380 -> 446 -> 555 us over the boot; U
# read 241.6 us against a 326.3 us spin, rounds 1.50 1.56 1.41 1.70), so as in
# O and F one more measurement is allowed, both reported.
# A spin ends at the first clock read past its deadline: never short, and
# long only by a preempted vCPU. fio must see at least the spin, judged by
# the median over the rounds of remote - local p50 (fio_clat_pair's
# PAIR_P50_EXTRA_US): a difference of means also carries the host's stalls,
# which hold a few requests up for milliseconds and moved it by 30-40 us
# (CI of 2026-12-05: 263.8 us against a 304.5 us spin, on the code that had
# passed an hour before). The difference of means is still reported.
# "At least the spin" is 90 % of it, and of what fio sees of a spin at all:
# on some hosts fio sees less of any spin, the hook F uses as much as this
# one (2026-12-07, three boots in a row: U 244-246 us of a 305 us spin, and F
# 84-86 % of its own by the means), so the bar is 0.9 x U's spin x the share
# F's fio saw in this boot, taken as at least 0.75 and at most 1 (so at most
# 270 us, at least 0.675 of the spin); with no share from F, 270 us.
ok=0 u_tries=() started=0 u_bar=270
for _ in 1 2; do
	lab_start --us 300 --tracepoint || break
	started=1
	fio_clat_pair "$dev" "$local_cpus" "$remote_cpus" 4 "$secs"
	lab_stop
	mean_extra=$(awk -v r="$PAIR_REMOTE_US" -v l="$PAIR_LOCAL_US" 'BEGIN { printf "%.1f", r - l }')
	u_tries+=("$PAIR_P50_EXTRA_US")
	[[ -n $f_seen ]] && u_bar=$(awk -v f="$f_seen" -v s="$LAB_MEAN_US" 'BEGIN {
		f = (f < 0.75) ? 0.75 : ((f > 1) ? 1 : f); b = 0.9 * f * s
		printf "%.1f\n", ((b > 270) ? 270 : b) }')
	[[ $u_bar =~ ^[0-9]+\.[0-9]$ ]] || u_bar=270
	[[ $LAB_LINE == *block_rq_issue* ]] && pct_ge "$LAB_MEAN_US" 300 && within "$LAB_LATE_PCT" 0 25 &&
		pct_ge "$PAIR_P50_EXTRA_US" "$u_bar" && ((LAB_RC == 0)) && { ok=1; break; }
done
if ((started)); then
	check "U --us 300 --tracepoint: spins >= 300 us, <= 25 % late, fio's p50 sees >= 0.9 x the spin fio sees in F" "$ok" \
		"bar $u_bar us (F's fio saw ${f_seen:-?} of its spin); mean spin $LAB_MEAN_US us over $LAB_REMOTE requests, $LAB_LATE_PCT % more than 10 % late; fio remote - local p50 $PAIR_P50_EXTRA_US us (median of rounds $PAIR_P50_EXTRAS), of means $mean_extra us (local $PAIR_LOCAL_US, remote $PAIR_REMOTE_US; ratios $PAIR_ROUNDS); measurements: ${#u_tries[@]}, p50 extras ${u_tries[*]}; $LAB_LINE"
else
	check "U lab --us 300 --tracepoint starts" 0 "$LAB_LINE"
fi

# ---- N. scx_esn's own P_numa in the lab ------------------------------------------
# The lab is calibrated with scx_esn already running: under TCG every BPF
# program is emulated, so the guest's device latency is not what it is under
# EEVDF, and a spin calibrated there is a different factor here. One fio job,
# its affinity flipped between the nodes every half second, so each control
# interval has local and remote requests and, as in the calibration, one
# reader at a time (two readers plus a spinning vCPU starve the emulated
# device of host CPU: seen p99 10-15 ms on both sides, a mean ratio of 1.38).
out=$ESN_WORK/sched-N.stdout err=$ESN_WORK/sched-N.stderr
if sched_start "$out" "$err" 60 "$bin" --stats 1 --control-interval 1 --no-state; then
	if lab_start --factor 2.0; then
		fio_randread_args "$dev" 1 25 --cpus_allowed="$local_cpus"
		"${FIO[@]}" >>"$ESN_WORK/commands.log" 2>&1 &
		fio_pid=$!
		sleep 1
		side=0
		while kill -0 "$fio_pid" 2>/dev/null; do
			cpus=$local_cpus
			((side ^= 1)) && cpus=$remote_cpus
			for p in $(pgrep -f esn-randread); do taskset -a -p -c "$cpus" "$p" >/dev/null 2>&1; done
			sleep 0.5
		done
		wait "$fio_pid"
		lab_stop
	else
		check "N lab --factor 2.0 starts under scx_esn" 0 "$LAB_LINE"
	fi
	kill -INT "$sched_pid"
	sched_wait_exit 30 || sched_kill
	# The last "measured" reading of node 1 (the controller's own line).
	pn=$(sed -n 's/^control n1: .*P_numa \([0-9.]*\) measured.*/\1/p' "$out" | tail -n1)
	ok=0; [[ -n $pn ]] && pct_ge "$pn" 1.6 && ok=1
	check "N scx_esn's measured P_numa in the lab at 2.0 >= 1.6" "$ok" \
		"P_numa ${pn:-never measured} (last 'control n1' line: $(grep '^control n1:' "$out" | tail -n1)); $LAB_LINE"
else
	check "N scx_esn loads" 0 "$SCHED_WHY"
fi

# ---- Z. removed: back to no penalty ----------------------------------------------
# Two referees: the kernel lists no lab program (bpftool; the names are cut
# to 15 characters), and fio's pinned ratio is back near 1.0 (with the
# factor-2.0 spin still attached it reads about 2).
left=$(bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
print(" ".join(p.get("name", "") for p in json.load(sys.stdin) if p.get("name", "").startswith(("lab_after_start", "lab_at_rq_issue"))))' 2>/dev/null) ||
	left="(bpftool could not list programs)"
settled_ratio 0.85 1.15
ok=0; ((SETTLED_OK)) && [[ -z $left ]] && ok=1
check "Z after the lab exits: nothing attached, remote/local back near 1.0" "$ok" \
	"lab programs loaded: ${left:-none}; ratio $SETTLED_RATIO (median of ${#SETTLED_ROUNDS[@]} rounds: ${SETTLED_ROUNDS[*]}; last measurement local $PAIR_LOCAL_US us, remote $PAIR_REMOTE_US us, p50 remote - local $PAIR_P50_EXTRA_US us; measurements: ${#SETTLED_TRIES[@]}, medians so far ${SETTLED_TRIES[*]}; O's local $off_local us)"

finish
