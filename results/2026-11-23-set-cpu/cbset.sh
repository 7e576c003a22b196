#!/usr/bin/env bash
# one memaslap run against sluice BUCKET CFG with per-thread CPU sampled mid-run
. /tmp/rc/lib.sh
start_sluice $1 $3
run_memaslap $2 &
mp=$!
sleep 3; python3 /tmp/rc/threads.py $pid 5; echo "memaslap: $(python3 /tmp/rc/threads.py $mp 0.1 | tail -1)"
wait $mp
curl -s 127.0.0.1:17022/api/v1/buckets/default/stats | python3 -c "import json,sys;d=json.load(sys.stdin);print({k:d[k] for k in ['flusher_items','flusher_commits','cmd_set'] if k in d})"
kill $pid; wait $pid 2>/dev/null; rm -rf $data
echo "TPS $(tps)"
