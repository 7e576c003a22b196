#!/usr/bin/env bash
# Sluice and memcached alternating, side by side.
# usage: mslap.sh BUCKET CFG(get90|set100) RUNS [BIN]
. /tmp/rc/lib.sh
for r in $(seq $3); do for t in sluice memcached; do
  if [ $t = sluice ]; then start_sluice $1 $4; else start_memcached; fi
  run_memaslap $2
  kill $pid; wait $pid 2>/dev/null; [ $t = sluice ] && rm -rf $data
  echo "$t $r $(tps)"
done; done
