#!/usr/bin/env bash
# usage: mslap.sh BUCKET CFG(get90|set100) RUNS [BIN]
bucket=$1; cfg=$2; runs=$3; bin=${4:-/work/main/target/release/sluice}
out=/tmp/rc/mslap; mkdir -p $out
printf 'key\n32 32 1\nvalue\n1024 1024 1\ncmd\n0 0.1\n1 0.9\n' > $out/get90.cfg
printf 'key\n32 32 1\nvalue\n1024 1024 1\ncmd\n0 1.0\n1 0.0\n' > $out/set100.cfg
port=17011
for r in $(seq $runs); do for t in sluice memcached; do
  if [ $t = sluice ]; then data=$(mktemp -d /tmp/msl.XXXX)
    $bin server --data-dir $data --kv-port 17021 --admin-port 17022 --memcached-port $port --bucket-type $bucket --memory-quota-mb 2048 --log warn > $out/server.log 2>&1 &
  else memcached -u root -l 127.0.0.1 -p $port -t 2 -m 2048 -c 1024 -U 0 & fi
  pid=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  memcaslap -s 127.0.0.1:$port -T 2 -c 50 -F $out/$cfg.cfg -t 10s -S 10s -B > $out/run.txt 2>&1
  kill $pid; wait $pid 2>/dev/null; [ $t = sluice ] && rm -rf $data
  echo "$t $r $(grep -E '^Run time' $out/run.txt | sed 's/.*TPS: \([0-9]*\).*/\1/')"
done; done
