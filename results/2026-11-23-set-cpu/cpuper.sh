#!/usr/bin/env bash
# one memaslap run against sluice; prints TPS, flusher us/item, server us/op (whole run), peak RSS
# usage: cpuper.sh BUCKET CFG [BIN]
. /tmp/rc/lib.sh
start_sluice $1 $3
run_memaslap $2
ftid=$(grep -l sluice-flusher /proc/$pid/task/*/comm | head -1 | xargs -r dirname)
fcpu=$( [ -n "$ftid" ] && awk '{print $14+$15}' $ftid/stat || echo 0)
scpu=$(awk '{print $14+$15}' /proc/$pid/stat)
rss=$(grep VmHWM /proc/$pid/status | awk '{print $2}')
st=$(curl -s 127.0.0.1:17022/api/v1/buckets/default/stats)
kill $pid; wait $pid 2>/dev/null; rm -rf $data
echo "$st" | python3 -c "
import json,sys;d=json.load(sys.stdin);it=int(d['flusher_items']);s=int(d['cmd_set'])+int(d.get('cmd_get',0))
print(f'TPS $(tps) flusher {$fcpu*1e4/max(it,1):.2f} us/item ({it} items) server {$scpu*1e4/max(s,1):.2f} us/op hwm ${rss}kB')"
