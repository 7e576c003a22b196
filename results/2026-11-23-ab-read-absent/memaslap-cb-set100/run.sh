#!/bin/bash
# memaslap -B couchbase 100% set against Sluice's memcached port: base vs new binaries, alternating
printf 'key\n32 32 1\nvalue\n1024 1024 1\ncmd\n0 1.0\n1 0.0\n' > /tmp/set100.cfg
for i in 1 2 3; do for b in base new; do
  d=$(mktemp -d)
  /tmp/sluice-$b server --data-dir $d --kv-port 16510 --admin-port 16591 --memcached-port 16511 --bucket-type couchbase --memory-quota-mb 2048 --log warn > /tmp/ms-$b.log 2>&1 &
  SP=$!; sleep 2
  memcaslap -s 127.0.0.1:16511 -T 2 -c 50 -F /tmp/set100.cfg -t 10s -S 10s -B > /tmp/ms-$b-$i.txt 2>&1
  st=$(curl -s localhost:16591/api/v1/buckets/default/stats)
  ok=$(echo "$st" | python3 -c "import json,sys; d=json.load(sys.stdin); print(int(d['cmd_set'])-int(d['tmp_fails']), d['tmp_fails'], d['flusher_items'])")
  echo "$b $i: $(grep -E '^Run time' /tmp/ms-$b-$i.txt | awk '{print $6}') sets_ok/tmpfail/flushed $ok"
  kill $SP; wait $SP 2>/dev/null; rm -rf $d
done; done
