#!/usr/bin/env bash
# perf record, 5 s mid-run, of the threads whose names match THREADS (default: the flusher and
# fjall's worker; THREADS=sluice-conn for the connection threads).
# usage: perfflush.sh BUCKET CFG [BIN]
. /tmp/rc/lib.sh
start_sluice $1 $3
run_memaslap $2 &
mp=$!
sleep 3
tids=$(grep -l -E "${THREADS:-sluice-flusher|fjall}" /proc/$pid/task/*/comm | xargs -n1 dirname | xargs -n1 basename | paste -sd,)
perf record -F 2000 -g -t $tids -o /tmp/rc/perf.data -- sleep 5 2>/dev/null >/dev/null
wait $mp
kill $pid; wait $pid 2>/dev/null; rm -rf $data
echo "TPS $(tps)"
