#!/bin/bash
# alternate base and read builds, each against memcached in the same invocation
for i in 1 2 3; do
  for b in base read; do
    /tmp/sluice-$b bench kv --bucket-type ephemeral --memory-quota-mb 2048 --get-ratio 0.9 \
      --connections 50 --value-bytes 1024 --vs memcached --runs 1 --duration-s 10 --warmup-s 2 \
      --out /tmp/ab1/$b-$i > /tmp/ab1/$b-$i.txt 2>&1
    echo "$b $i: $(grep -E '^sluice median|^memcached median|sluice/memcached' /tmp/ab1/$b-$i.txt | tr -s ' ' | tr '\n' '|')"
  done
done
