#!/usr/bin/env bash
# Crawl queue push+pop rate against redis-server LPUSH/RPOP pipelined, in one run, on loopback.
# Installs redis-server (Debian package) when it is missing. Bounded: the redis-server it starts
# is stopped at the end. Extra arguments go to `crawlfleet bench queue` (e.g. --json).
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${TOTAL:-10000000}
PIPELINE=${PIPELINE:-1000}
CONNECTIONS=${CONNECTIONS:-1}
PORT=${PORT:-16380}

if ! command -v redis-server >/dev/null; then
  apt-get update -qq && apt-get install -y -qq redis-server
fi
# `crawlfleet bench` runs the crawlfleet-bench executable built beside it.
cargo build --release --quiet -p crawlfleet -p crawlfleet-bench
bin=target/release/crawlfleet
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
  redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
  sleep 0.1
done

"$bin" bench queue --total "$TOTAL" --dir "$work/queue" --pipeline "$PIPELINE" \
  --connections "$CONNECTIONS" --vs-redis "127.0.0.1:$PORT" "$@"
