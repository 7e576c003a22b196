#!/usr/bin/env bash
cfg=$1; out=/tmp/rc/mslap; port=17011
memcached -u root -l 127.0.0.1 -p $port -t 2 -m 2048 -c 1024 -U 0 & pid=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
memcaslap -s 127.0.0.1:$port -T 2 -c 50 -F $out/$cfg.cfg -t 10s -S 10s -B > $out/run.txt 2>&1
scpu=$(awk '{print $14+$15}' /proc/$pid/stat)
ops=$(printf 'stats\r\nquit\r\n' | timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; cat <&3" | awk '/cmd_set|cmd_get/ {s+=$3} END {print s}')
kill $pid; wait $pid 2>/dev/null
tps=$(grep -E '^Run time' $out/run.txt | sed 's/.*TPS: \([0-9]*\).*/\1/')
python3 -c "print(f'memcached TPS $tps server {$scpu*1e4/max($ops,1):.2f} us/op ops $ops')"
