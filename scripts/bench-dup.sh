#!/usr/bin/env bash
# Duplicate server throughput against redis-server SET NX, in one run, on loopback:
# first the duplicate server alone, then with a replica attached.
# Installs redis-server (Debian package) when it is missing. Bounded: every process it starts is
# stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${TOTAL:-2000000}
CONNECTIONS=${CONNECTIONS:-4}
PIPELINE=${PIPELINE:-256}

if ! command -v redis-server >/dev/null; then
  apt-get update -qq && apt-get install -y -qq redis-server
fi
# `crawlfleet bench` runs the crawlfleet-bench executable built beside it.
cargo build --release --quiet -p crawlfleet -p crawlfleet-bench
bin=target/release/crawlfleet
work=$(mktemp -d)
# Each process started leaves its pid in $work/*.pid: `start` runs in a command substitution
# (a subshell), so a shell array would not see its pids.
cleanup() {
  for f in "$work"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

redis-server --port 16379 --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
echo $! >"$work/redis.pid"
start() { # name args... ; prints the bound address
  "$bin" "$@" >"$work/$1.out" 2>"$work/$1.err" &
  echo $! >"$work/$1-$$-$BASHPID.pid"
  for _ in $(seq 100); do
    addr=$(sed -n 's/.*listening on //p' "$work/$1.out")
    [ -n "$addr" ] && { echo "$addr"; return; }
    sleep 0.1
  done
  echo "$1 did not start" >&2; cat "$work/$1.err" >&2; exit 1
}
sleep 0.5

alone=$(start dupserver --listen 127.0.0.1:0 --data-dir "$work/alone")
echo "== duplicate server alone"
"$bin" bench dup --target "$alone" --total "$TOTAL" --connections "$CONNECTIONS" --pipeline "$PIPELINE" --vs-redis 127.0.0.1:16379 "$@"

replica=$(start dupreplica --listen 127.0.0.1:0 --data-dir "$work/replica")
server=$(start dupserver --listen 127.0.0.1:0 --data-dir "$work/server" --replica "$replica")
sleep 0.5
redis-cli -p 16379 flushall >/dev/null 2>&1 || true
echo "== duplicate server with a replica"
"$bin" bench dup --target "$server" --total "$TOTAL" --connections "$CONNECTIONS" --pipeline "$PIPELINE" --vs-redis 127.0.0.1:16379 "$@"
