#!/bin/bash
out=$ESN_OUTDIR
{
stress-ng --cpu 2 --timeout 6s --metrics-brief >/tmp/s.log 2>&1 &
sp=$!
sleep 3
echo "sp=$sp"
echo "pgrep: $(pgrep -P $sp | tr '\n' ' ')"
echo "children: $(cat /proc/$sp/task/$sp/children)"
ps -eo pid,ppid,comm | grep -i stress
for p in $(pgrep -P $sp); do echo "$p $(cat /proc/$p/schedstat)"; done
wait $sp
cat /tmp/s.log
} >"$out/dbg.txt" 2>&1
