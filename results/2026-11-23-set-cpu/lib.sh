# Sourced by the scripts here (installed in /tmp/rc; output goes to /tmp/rc/mslap).
out=/tmp/rc/mslap; port=17011
mkdir -p $out
printf 'key\n32 32 1\nvalue\n1024 1024 1\ncmd\n0 0.1\n1 0.9\n' > $out/get90.cfg
printf 'key\n32 32 1\nvalue\n1024 1024 1\ncmd\n0 1.0\n1 0.0\n' > $out/set100.cfg

wait_port() {
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
}

# start_sluice BUCKET [BIN]: a node on loopback with its memcached port on $port; sets $pid and
# $data. FLAGS=... adds server flags.
start_sluice() {
  local bin=${2:-/work/main/target/release/sluice}
  data=$(mktemp -d /tmp/msl.XXXX)
  $bin server --data-dir $data --kv-port 17021 --admin-port 17022 --memcached-port $port \
    --bucket-type $1 --memory-quota-mb ${QUOTA:-2048} --log warn ${FLAGS:-} > $out/server.log 2>&1 &
  pid=$!
  wait_port
}

# start_memcached: memcached -t 2 on $port, as in peer-baselines.md; sets $pid.
start_memcached() {
  memcached -u root -l 127.0.0.1 -p $port -t 2 -m ${QUOTA:-2048} -c 1024 -U 0 &
  pid=$!
  wait_port
}

# run_memaslap CFG: memaslap -B, 50 connections, 10 s, into $out/run.txt.
run_memaslap() {
  memcaslap -s 127.0.0.1:$port -T 2 -c 50 -F $out/$1.cfg -t 10s -S 10s -B > $out/run.txt 2>&1
}

# successful ops/s: memaslap counts a refused (TMPFAIL) set as a transaction
tps() { local t e; t=$(grep -E '^Run time' $out/run.txt | sed 's/.*TPS: \([0-9]*\).*/\1/'); e=$(grep -c 'Unknown error' $out/run.txt); echo "$(( t - e / 10 )) (errors $e)"; }
