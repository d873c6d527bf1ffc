#!/usr/bin/env bash
# Duplicate server throughput against redis-server SET NX, in one run, on loopback:
# first the duplicate server alone, then with a replica attached. Each run is compared with two
# redis-servers given the same requests, connections, pipeline depth and flow: one without
# persistence (what the issue names), and one keeping the duplicate server's guarantee
# (appendonly yes, appendfsync always: every write fsync'd before it is answered), its file in
# the same temporary directory, on the same disk, as the duplicate server's log.
# Installs redis-server (Debian package) when it is missing. Bounded: every process it starts is
# stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${TOTAL:-2000000}
CONNECTIONS=${CONNECTIONS:-4}
PIPELINE=${PIPELINE:-1024}
REDIS_PORT=${REDIS_PORT:-16379}
REDIS_DURABLE_PORT=${REDIS_DURABLE_PORT:-16389}

if ! command -v redis-server >/dev/null; then
  apt-get update -qq && apt-get install -y -qq redis-server
fi
# `crawlfleet bench` runs the crawlfleet-bench executable built beside it. BIN_DIR names a
# directory holding both (an earlier build kept for comparison, say) instead of building.
if [ -n "${BIN_DIR:-}" ]; then
  bin=$BIN_DIR/crawlfleet
else
  cargo build --release --quiet -p crawlfleet -p crawlfleet-bench
  bin=target/release/crawlfleet
fi
work=$(mktemp -d)
# Each process started leaves its pid in $work/*.pid: `start` runs in a command substitution
# (a subshell), so a shell array would not see its pids.
cleanup() {
  for f in "$work"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  >"$work/redis.log" 2>&1 &
echo $! >"$work/redis.pid"
mkdir "$work/redis-durable"
redis-server --port "$REDIS_DURABLE_PORT" --bind 127.0.0.1 --save '' --appendonly yes \
  --appendfsync always --dir "$work/redis-durable" --daemonize no >"$work/redis-durable.log" 2>&1 &
echo $! >"$work/redis-durable.pid"
for port in "$REDIS_PORT" "$REDIS_DURABLE_PORT"; do
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli -p "$port" ping >/dev/null || { echo "redis-server on port $port did not start" >&2; exit 1; }
done
# Answering is not enough: another redis-server may hold a port (set REDIS_PORT and
# REDIS_DURABLE_PORT then); ours must still be running.
for f in "$work"/redis.pid "$work"/redis-durable.pid; do
  kill -0 "$(cat "$f")" 2>/dev/null || { echo "redis-server exited: see ${f%.pid}.log" >&2; cat "${f%.pid}.log" >&2; exit 1; }
done
echo "redis durable: $(redis-cli -p "$REDIS_DURABLE_PORT" config get appendfsync | tr '\n' ' ')$(redis-cli -p "$REDIS_DURABLE_PORT" config get appendonly | tr '\n' ' ')"
echo "load: $(uptime)"
flush_redis() {
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
  redis-cli -p "$REDIS_DURABLE_PORT" flushall >/dev/null
}
peers=(--vs-redis "127.0.0.1:$REDIS_PORT" --vs-redis-durable "127.0.0.1:$REDIS_DURABLE_PORT")
# Each process has output files of its own (`label`): with one file per command, the second
# server's address was once read from the first server's output before the new process had
# truncated it, and the "with a replica" run went to the server alone.
start() { # label command args... ; prints the bound address
  local label=$1
  shift
  "$bin" "$@" >"$work/$label.out" 2>"$work/$label.err" &
  echo $! >"$work/$label-$$-$BASHPID.pid"
  for _ in $(seq 100); do
    addr=$(sed -n 's/.*listening on //p' "$work/$label.out")
    [ -n "$addr" ] && { echo "$addr"; return; }
    sleep 0.1
  done
  echo "$label did not start" >&2; cat "$work/$label.err" >&2; exit 1
}

alone=$(start alone dupserver --listen 127.0.0.1:0 --data-dir "$work/alone")
echo "== duplicate server alone"
"$bin" bench dup --target "$alone" --total "$TOTAL" --connections "$CONNECTIONS" --pipeline "$PIPELINE" "${peers[@]}" "$@"

replica=$(start replica dupreplica --listen 127.0.0.1:0 --data-dir "$work/replica")
server=$(start server dupserver --listen 127.0.0.1:0 --data-dir "$work/server" --replica "$replica")
[ "$server" != "$alone" ] || { echo "the replicated server's address is the lone server's" >&2; exit 1; }
sleep 0.5
flush_redis
echo "== duplicate server with a replica"
"$bin" bench dup --target "$server" --total "$TOTAL" --connections "$CONNECTIONS" --pipeline "$PIPELINE" "${peers[@]}" "$@"
echo "load: $(uptime)"
