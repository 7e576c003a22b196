#!/usr/bin/env bash
# one memaslap run against sluice; prints TPS, flusher us/item, server us/set (whole run)
bucket=$1; cfg=$2; bin=${3:-/work/main/target/release/sluice}
out=/tmp/rc/mslap; port=17011
data=$(mktemp -d /tmp/msl.XXXX)
$bin server --data-dir $data --kv-port 17021 --admin-port 17022 --memcached-port $port --bucket-type $bucket --memory-quota-mb 2048 --log warn ${FLAGS:-} > $out/server.log 2>&1 &
pid=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
memcaslap -s 127.0.0.1:$port -T 2 -c 50 -F $out/$cfg.cfg -t 10s -S 10s -B > $out/run.txt 2>&1
ftid=$(grep -l sluice-flusher /proc/$pid/task/*/comm | head -1 | xargs -r dirname)
fcpu=$( [ -n "$ftid" ] && awk '{print $14+$15}' $ftid/stat || echo 0)
scpu=$(awk '{print $14+$15}' /proc/$pid/stat)
rss=$(grep VmHWM /proc/$pid/status | awk '{print $2}')
st=$(curl -s 127.0.0.1:17022/api/v1/buckets/default/stats)
kill $pid; wait $pid 2>/dev/null; rm -rf $data
tps=$(grep -E '^Run time' $out/run.txt | sed 's/.*TPS: \([0-9]*\).*/\1/')
echo "$st" | python3 -c "
import json,sys;d=json.load(sys.stdin);it=int(d['flusher_items']);s=int(d['cmd_set'])+int(d.get('cmd_get',0))
print(f'TPS $tps flusher {$fcpu*1e4/max(it,1):.2f} us/item ({it} items) server {$scpu*1e4/max(s,1):.2f} us/op hwm ${rss}kB')"
