#!/bin/bash
for i in 1 2 3; do
  for b in read inline; do
    /tmp/sluice-$b bench kv --bucket-type ephemeral --memory-quota-mb 2048 --get-ratio 0.9 \
      --connections 50 --value-bytes 1024 --vs memcached --runs 1 --duration-s 10 --warmup-s 2 \
      --out /tmp/ab2/$b-$i > /tmp/ab2/$b-$i.txt 2>&1
    echo "$b $i: $(grep -E '^(sluice|memcached) ' /tmp/ab2/$b-$i.txt | grep -v median | awk '{print $1,$2,$7}' | tr '\n' ' ') $(grep sluice/memcached /tmp/ab2/$b-$i.txt)"
  done
done
