#!/usr/bin/env bash
# syscalls per op: sluice BUCKET CFG BIN | memcached CFG
. /tmp/rc/lib.sh
if [ $1 = memcached ]; then start_memcached; cfg=$2; else start_sluice $1 $3; cfg=$2; fi
run_memaslap $cfg & mp=$!
sleep 3
perf stat -e raw_syscalls:sys_enter -e context-switches -p $pid -o /tmp/rc/sysc.txt -- sleep 4 2>/dev/null
perf trace -s -p $pid -o /tmp/rc/trace.txt -- sleep 1 2>/dev/null
wait $mp
kill $pid; wait $pid 2>/dev/null; [ -n "${data:-}" ] && rm -rf $data
echo "TPS $(tps)"; grep -E "sys_enter|context" /tmp/rc/sysc.txt
grep -E "^\s+[a-z_0-9]+\s+[0-9]+" /tmp/rc/trace.txt | awk '{c[$1]+=$2} END {for (k in c) print k, c[k]}' | sort -k2 -nr | head -8
