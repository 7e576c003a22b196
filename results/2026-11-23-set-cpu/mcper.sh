#!/usr/bin/env bash
# the same for memcached -t 2: TPS and server CPU per op (from its own stats)
# usage: mcper.sh CFG
. /tmp/rc/lib.sh
start_memcached
run_memaslap $1
scpu=$(awk '{print $14+$15}' /proc/$pid/stat)
ops=$(printf 'stats\r\nquit\r\n' | timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; cat <&3" | awk '/cmd_set|cmd_get/ {s+=$3} END {print s}')
kill $pid; wait $pid 2>/dev/null
python3 -c "print(f'memcached TPS $(tps) server {$scpu*1e4/max($ops,1):.2f} us/op ops $ops')"
