#!/usr/bin/env bash
# Diagnostic (not a test): edges A's fork loop beside stress-ng --cpu 2, with
# exec of /bin/true (over the 9p root) and with a subshell fork (no exec, no
# 9p), under EEVDF and each scx_esn build in FK_BINS, interleaved per round.
set -u
. "$ESN_REPO/tests/vm/guest-lib.sh"
out=$ESN_OUTDIR
window() { # KIND -> prints forks bogo
	cp -f /work/notes/forks/true.static "$ESN_WORK/true"
	stress-ng --cpu 2 --timeout 10s --temp-path "$ESN_WORK" --metrics-brief >"$ESN_WORK/stress.log" 2>&1 &
	local sp=$! end=$((SECONDS + 10)) n=0
	local s0; s0=$(head -1 /proc/stat)
	case $1 in
	exec) while ((SECONDS < end)); do /bin/true && n=$((n + 1)); done ;;
	tmpexec) while ((SECONDS < end)); do "$ESN_WORK/true" && n=$((n + 1)); done ;;
	hogs) sleep 10 ;;
	chain) kill $sp; end=$((SECONDS + 10)); while ((SECONDS < end)); do "$ESN_WORK/true" && n=$((n + 1)); done ;;
	sub) while ((SECONDS < end)); do (:) && n=$((n + 1)); done ;;
	esac
	local s1; s1=$(head -1 /proc/stat)
	wait $sp
	# cpu line deltas: user nice system idle iowait irq softirq (ticks)
	local cpu; cpu=$(python3 -c "
a=list(map(int,'$s0'.split()[1:8])); b=list(map(int,'$s1'.split()[1:8]))
d=[y-x for x,y in zip(a,b)]; t=sum(d) or 1
print('usr%.0f sys%.0f idle%.0f irq%.0f' % (100*(d[0]+d[1])/t, 100*d[2]/t, 100*(d[3]+d[4])/t, 100*(d[5]+d[6])/t))")
	echo "$n $(awk '/metrc:/ && $4 == "cpu" { print $5; exit }' "$ESN_WORK/stress.log") $cpu"
}
run() { # NAME BIN|eevdf KIND
	local name=$1 bin=$2 kind=$3 spid=
	if [[ $bin != eevdf ]]; then
		"$bin" --no-state >"$ESN_WORK/s.out" 2>&1 &
		spid=$!
		for _ in $(seq 60); do [[ $(cat /sys/kernel/sched_ext/state) == enabled ]] && break; sleep 0.5; done
		sleep 1
	fi
	local r; r=$(window "$kind")
	[[ -n $spid ]] && { kill -INT $spid; wait $spid; sleep 1; }
	echo "$name $kind $r" | tee -a "$out/summary"
}
for r in $(seq "${FK_ROUNDS:-3}"); do
	for kind in ${FK_KINDS:-exec sub}; do
		run eevdf eevdf $kind
		for nb in $FK_BINS; do run "${nb%%=*}" "${nb#*=}" $kind; done
	done
done
echo PASS > "$out/result"
