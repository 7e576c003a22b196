#!/usr/bin/env bash
# BIN_DIR holds sluice-base (b557b6b) and sluice-new (7b7c0e4). MIX=0.9 RUNS=5 for the table in results.txt.
# A/B on the generator's couchbase load (100k keys rewritten): ops/s and flusher CPU per item.
set -u
runs=${RUNS:-3}
mix=${MIX:-0.0}
port=15541
for r in $(seq $runs); do
  for v in base new; do
    bin=${BIN_DIR:-.}/sluice-$v
    data=$(mktemp -d /tmp/sluice-ab.XXXX)
    $bin server --data-dir $data --kv-port $port --admin-port $((port+2)) \
      --bucket-type couchbase --memory-quota-mb 2048 --log warn > /tmp/sluice-ab-server.log 2>&1 &
    pid=$!
    for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
    ${BIN_DIR:-.}/sluice-new bench kv --connect 127.0.0.1:$port --get-ratio $mix --connections 50 --value-bytes 1024 \
      --runs 1 --duration-s 10 --warmup-s 2 --out /tmp/sluice-abgen-out > /tmp/sluice-ab-gen.txt 2>&1
    ftid=$(grep -l sluice-flusher /proc/$pid/task/*/comm | head -1 | xargs dirname)
    fcpu=$(awk '{print $14+$15}' $ftid/stat)
    st=$(curl -s 127.0.0.1:$((port+2))/api/v1/buckets/default/stats)
    kill $pid; wait $pid 2>/dev/null; rm -rf $data
    items=$(echo "$st" | python3 -c "import json,sys;print(json.load(sys.stdin)['flusher_items'])"); commits=$(echo "$st" | python3 -c "import json,sys;d=json.load(sys.stdin);print(d['flusher_commits'], d['cmd_set'])")
    ops=$(grep -E "^sluice " /tmp/sluice-ab-gen.txt | head -1 | awk "{print \$2}")
    python3 -c "print(f'$v run $r: ops/s $ops persisted {$items} flusher {$fcpu/100:.2f} s = {$fcpu*1e4/max($items,1):.2f} us/item commits,sets $commits')"
  done
done
