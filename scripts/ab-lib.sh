# Usage: . scripts/ab-lib.sh   (sourced by scripts/ab-memaslap, ab-bench-kv, ab-replication and
# profile-memaslap; not a command of its own)
#
# What the A/B scripts share: naming what a run measures (a TARGET), starting and stopping a
# server on loopback, one memaslap run, and CPU read from /proc.
#
# A TARGET is one of:
#   sluice       the release build, $SLUICE_BIN (default target/release/sluice);
#   NAME=VALUE   $SLUICE_BIN with that variable in its environment, for a setting the server
#                reads from there: SLUICE_CONNECTION_PLACEMENT=round-robin,
#                SLUICE_FLUSH_INTERVAL_MS=0, _RJEM_MALLOC_CONF=dirty_decay_ms:1000, ...;
#   PATH         another Sluice binary, e.g. /tmp/sluice-base (built from another commit);
#   memcached    memcached -t 2, as in design/peer-baselines.md (memaslap scripts only).
#
# Settings, from the environment: QUOTA (MiB for either server, default 2048), SECS (seconds
# measured per run, default 10), FLAGS (more `sluice server` flags), OUT (output directory).

ab_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SLUICE_BIN=${SLUICE_BIN:-$ab_root/target/release/sluice}
QUOTA=${QUOTA:-2048}
SECS=${SECS:-10}
clk_tck=$(getconf CLK_TCK)

# ab_out NAME: creates and echoes $OUT, by default bench-out/NAME-DATE at the repository's root.
ab_out() {
  local dir=${OUT:-$ab_root/bench-out/$1-$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$dir"
  echo "$dir"
}

# target_resolve TARGET: sets t_label (for output and file names), t_bin and t_env (an
# environment assignment for `env`, or empty).
target_resolve() {
  t_env=
  case $1 in
    memcached) t_label=memcached; t_bin=memcached ;;
    sluice) t_label=sluice; t_bin=$SLUICE_BIN ;;
    *=*) t_label=${1#SLUICE_}; t_bin=$SLUICE_BIN; t_env=$1 ;;
    *) t_label=$(basename "$1"); t_bin=$1 ;;
  esac
  t_label=$(printf '%s' "$t_label" | tr -c 'A-Za-z0-9._=:-' '_')
  if [ "$t_bin" != memcached ] && [ ! -x "$t_bin" ]; then
    echo "$1: no Sluice binary at $t_bin (cargo build --release -p sluice-cli)" >&2
    exit 2
  fi
}

# target_run ARGS...: runs the target's Sluice binary with its environment, in the foreground.
target_run() {
  if [ -n "$t_env" ]; then exec_env=(env "$t_env"); else exec_env=(); fi
  "${exec_env[@]}" "$t_bin" "$@"
}

# usage: the calling script's leading comment, to stderr.
usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0" >&2; exit 2; }

need() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null || { echo "$c missing (Debian: memcached libmemcached-tools linux-perf curl python3)" >&2; exit 2; }
  done
}

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

wait_port() {
  local _
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "nothing listens on port $1 after 10 s" >&2
  return 1
}

# start_server TARGET BUCKET: memcached, or a Sluice node with a BUCKET bucket, on loopback.
# Sets pid, port (the memcached-protocol port), kv_port, admin_port and data (Sluice's data dir).
start_server() {
  target_resolve "$1"
  port=$(free_port); kv_port=; admin_port=; data=
  if [ "$t_bin" = memcached ]; then
    memcached -u root -l 127.0.0.1 -p "$port" -t 2 -m "$QUOTA" -c 1024 -U 0 &
  else
    kv_port=$(free_port); admin_port=$(free_port); data=$(mktemp -d /tmp/sluice-ab.XXXXXX)
    if [ -n "$t_env" ]; then exec_env=(env "$t_env"); else exec_env=(); fi
    # Not through target_run: a function put in the background is a subshell, and $! would
    # be that shell's pid rather than the server's (which kill and /proc need).
    # shellcheck disable=SC2086 # FLAGS is a list of flags
    "${exec_env[@]}" "$t_bin" server --data-dir "$data" --kv-port "$kv_port" \
      --admin-port "$admin_port" --memcached-port "$port" --bucket-type "$2" \
      --memory-quota-mb "$QUOTA" --log warn ${FLAGS:-} > "$out/server.log" 2>&1 &
  fi
  pid=$!
  servers+=("$pid")
  wait_port "$port"
}

stop_server() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -n "$data" ]; then rm -rf "$data"; fi
}

servers=()
stop_all() { local p; for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_all EXIT

# memaslap_configs: memaslap's get90 and set100 configs (32 B keys, 1 KiB values) in $out.
memaslap_configs() {
  printf 'key\n32 32 1\nvalue\n1024 1024 1\ncmd\n0 0.1\n1 0.9\n' > "$out/get90.cfg"
  printf 'key\n32 32 1\nvalue\n1024 1024 1\ncmd\n0 1.0\n1 0.0\n' > "$out/set100.cfg"
}

# run_memaslap CFG FILE: memaslap -B, 2 threads, 50 connections, SECS seconds, against $port.
# memaslap counts a refused request (TMPFAIL: a durable bucket whose flusher is behind) as a
# transaction and prints "Unknown error" for each; those lines leave FILE and an "errors: N"
# line takes their place.
run_memaslap() {
  memcaslap -s 127.0.0.1:"$port" -T 2 -c 50 -F "$out/$1.cfg" -t "${SECS}s" -S "${SECS}s" -B > "$2" 2>&1 || true
  local errors
  errors=$(grep -c '^Unknown error' "$2" || true)
  sed -i '/^Unknown error$/d' "$2"
  echo "errors: $errors" >> "$2"
}

# successful FILE: memaslap's TPS less its refused requests per second, and the refusals.
successful() {
  local tps errors
  tps=$(grep -o 'TPS: [0-9]*' "$1" | tail -1 | grep -o '[0-9]*' || echo 0)
  errors=$(sed -n 's/^errors: //p' "$1")
  echo "$(( tps - ${errors:-0} / SECS )) (errors ${errors:-0})"
}

# cpu_us PID [THREAD_REGEX]: CPU time in µs used so far by PID, or by its threads whose names
# match THREAD_REGEX.
cpu_us() {
  local ticks=0 f t
  if [ -z "${2:-}" ]; then
    ticks=$(awk '{print $14 + $15}' "/proc/$1/stat")
  else
    for f in /proc/"$1"/task/*; do
      grep -qE "$2" "$f/comm" 2>/dev/null || continue
      t=$(awk '{print $14 + $15}' "$f/stat" 2>/dev/null || echo 0)
      ticks=$(( ticks + t ))
    done
  fi
  echo $(( ticks * 1000000 / clk_tck ))
}

# sluice_stats KEY...: those keys of the node's bucket stats (0 when absent), one line.
sluice_stats() {
  curl -s -u "${SLUICE_USERNAME:-Administrator}:${SLUICE_PASSWORD:-password}" "127.0.0.1:$admin_port/api/v1/buckets/default/stats" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    d = {}
print(" ".join(str(d.get(k, 0)) for k in sys.argv[1:]))' "$@"
}

# memcached_ops: cmd_get + cmd_set from memcached's own stats.
memcached_ops() {
  printf 'stats\r\nquit\r\n' | timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; cat >&3; cat <&3" \
    | awk '/cmd_set|cmd_get/ {s += $3} END {print s + 0}'
}
