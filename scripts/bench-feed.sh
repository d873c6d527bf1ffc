#!/usr/bin/env bash
# Feeding throughput: durable operations acknowledged per second through content distributor
# sessions (one session, then four over two distributors), against redis-server XADD pipelined on
# the same documents in the same run. redis runs with `appendonly yes` and `appendfsync everysec`
# (it acknowledges before its fsync; a distributor acknowledges after its group commit).
# `crawlfleet bench feed` starts its own name server and two distributors (their data in a
# temporary directory). Installs redis-server (Debian package) when it is missing. Bounded:
# every process it starts is stopped at the end. Extra arguments go to `crawlfleet bench feed`
# (e.g. --json, --docs 200000, --body-bytes 8192).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null; then
  apt-get update -qq && apt-get install -y -qq redis-server
fi
# `crawlfleet bench` runs the crawlfleet-bench executable built beside it.
cargo build --release --quiet -p crawlfleet -p crawlfleet-bench
bin=target/release/crawlfleet
work=$(mktemp -d)
cleanup() {
  [ -e "$work/redis.pid" ] && kill "$(cat "$work/redis.pid")" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

redis-server --port 16380 --bind 127.0.0.1 --save '' --dir "$work" \
  --appendonly yes --appendfsync everysec --daemonize no >"$work/redis.log" 2>&1 &
echo $! >"$work/redis.pid"
for _ in $(seq 50); do
  redis-cli -p 16380 ping >/dev/null 2>&1 && break
  sleep 0.1
done
"$bin" bench feed --vs-redis 127.0.0.1:16380 "$@"
