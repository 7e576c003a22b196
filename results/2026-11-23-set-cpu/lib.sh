# Sourced by the scripts here: start_sluice BUCKET [BIN] starts a server on loopback with
# memcached port $port, sets $pid and $data, and waits for the port.
out=/tmp/rc/mslap; port=17011
start_sluice() {
  local bin=${2:-/work/main/target/release/sluice}
  data=$(mktemp -d /tmp/msl.XXXX)
  $bin server --data-dir $data --kv-port 17021 --admin-port 17022 --memcached-port $port \
    --bucket-type $1 --memory-quota-mb 2048 --log warn ${FLAGS:-} > $out/server.log 2>&1 &
  pid=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
}
