#!/bin/bash
# Our generator, ephemeral 90/10, two builds alternating (3 pairs), each against memcached:
#   ./run-eph.sh OUT_DIR NAME_A NAME_B   (binaries /tmp/sluice-NAME_A and /tmp/sluice-NAME_B)
# eph-read/ was `run-eph.sh eph-read base read`, eph-inline/ `run-eph.sh eph-inline read inline`.
out=$1; shift
for i in 1 2 3; do
  for b in "$@"; do
    /tmp/sluice-$b bench kv --bucket-type ephemeral --memory-quota-mb 2048 --get-ratio 0.9 \
      --connections 50 --value-bytes 1024 --vs memcached --runs 1 --duration-s 10 --warmup-s 2 \
      --out "$out/$b-$i" > "$out/$b-$i.txt" 2>&1
    echo "$b $i: $(grep sluice/memcached "$out/$b-$i.txt")"
  done
done
