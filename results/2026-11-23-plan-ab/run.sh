#!/usr/bin/env bash
# BIN_DIR holds sluice-base (7b7c0e4^ = b557b6b) and sluice-new (7b7c0e4), both `cargo build --release`.
# A/B: memaslap set100 on a couchbase node; per run: ok/s, persisted items, flusher CPU per item.
set -u
runs=${RUNS:-3}
secs=${SECS:-10}
cfg=${CFG:-./set100.cfg}
port=15531
for r in $(seq $runs); do
  for v in base new; do
    bin=${BIN_DIR:-.}/sluice-$v
    data=$(mktemp -d /tmp/sluice-ab.XXXX)
    $bin server --data-dir $data --kv-port $((port+1)) --admin-port $((port+2)) --memcached-port $port \
      --bucket-type couchbase --memory-quota-mb 2048 --log warn > /tmp/sluice-ab-server.log 2>&1 &
    pid=$!
    for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
    memcaslap -s 127.0.0.1:$port -T 2 -c 50 -F $cfg -t ${secs}s -S ${secs}s -B > /tmp/sluice-ab-m.txt 2>&1
    ftid=$(grep -l sluice-flusher /proc/$pid/task/*/comm | head -1 | xargs dirname)
    fcpu=$(awk '{print $14+$15}' $ftid/stat)
    st=$(curl -s 127.0.0.1:$((port+2))/api/v1/buckets/default/stats)
    kill $pid; wait $pid 2>/dev/null; rm -rf $data
    items=$(echo "$st" | python3 -c "import json,sys;print(json.load(sys.stdin)['flusher_items'])")
    errors=$(grep -c 'Unknown error' /tmp/sluice-ab-m.txt); tps=$(grep -o 'TPS: [0-9]*' /tmp/sluice-ab-m.txt | tail -1 | grep -o '[0-9]*')
    python3 -c "print(f'$v run $r: TPS $tps errors $errors ok/s {$tps-$errors//$secs} persisted {$items} flusher {$fcpu/100:.2f} s = {$fcpu*1e4/max($items,1):.2f} us/item')"
  done
done
