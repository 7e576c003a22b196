#!/usr/bin/env bash
# usage: place.sh BUCKET CFG RUNS MODES...  (modes: rr cpu pin memcached)
. /tmp/rc/lib.sh
b=$1; c=$2; n=$3; shift 3
for r in $(seq $n); do for t in "$@"; do
  if [ $t = memcached ]; then start_memcached; else SLUICE_CONNECTION_PLACEMENT=$t start_sluice $b; fi
  run_memaslap $c
  kill $pid; wait $pid 2>/dev/null; [ $t != memcached ] && rm -rf $data
  echo "$t $r $(tps)"
done; done
