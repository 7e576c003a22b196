#!/bin/bash
# Replication ladder, Sluice alone, alternating flush intervals (ms) run by run:
#   BIN=target/release/sluice ./run.sh 0 3 5
# The recorded runs (batch1..3) were made before the setting was a flag, with an experimental
# build that read the same interval in microseconds from SLUICE_FLUSH_MIN_ROUND_US (mr0 = none,
# mr3000 = 3 ms); SLUICE_FLUSH_INTERVAL_MS is what the committed server reads.
BIN=${BIN:-target/release/sluice}
for r in 1 2; do
  for ms in "$@"; do
    out=/tmp/fx/ms$ms-$r
    rm -rf "$out"
    SLUICE_FLUSH_INTERVAL_MS=$ms $BIN bench replication --items 100000 --step-s 20 --warmup-s 2 \
      --rates 5000,10000,20000 --base-port 14700 --out "$out" > "$out.log" 2>&1
    python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + '/results.json'))
print(sys.argv[1], ' '.join(f"{int(s['rate'])}:p99={s['repl_latency']['p99_us']/1000:.2f}ms" for s in d['steps']))
PY
  done
done
