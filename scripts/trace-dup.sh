#!/usr/bin/env bash
# Where a replicated PPDUP_ADD window's time goes, hop by hop: a replica, a duplicate server
# forwarding to it and `crawlfleet bench dup` (windows, CONNECTIONS x PIPELINE) each run under
# `strace -f -ttt -T -yy` (the socket calls, the log's writes and fdatasyncs), then
# scripts/dup_hops.py prints the median of each hop and each side's fdatasyncs, split by whether
# the log's grower was at work. Traced, the run goes at about half its rate: the hops' shares
# hold, not their lengths. TRACE_DIR keeps the traces (default: a temporary directory, removed).
# BIN_DIR runs binaries built earlier, as in bench-dup.sh. Needs strace and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${TOTAL:-1000000}
CONNECTIONS=${CONNECTIONS:-4}
PIPELINE=${PIPELINE:-1024}
command -v strace >/dev/null || { echo "trace-dup.sh needs strace" >&2; exit 1; }
if [ -n "${BIN_DIR:-}" ]; then
  bin=$BIN_DIR/crawlfleet
else
  cargo build --release --quiet -p crawlfleet -p crawlfleet-bench
  bin=target/release/crawlfleet
fi
work=$(mktemp -d)
out=${TRACE_DIR:-$work/trace}
mkdir -p "$out"
# strace's pid is what `$!` gives; the role it runs is its child, stopped by its own pid.
cleanup() {
  for f in "$work"/*.pid; do
    [ -e "$f" ] || continue
    child=$(pgrep -P "$(cat "$f")" || true)
    [ -n "$child" ] && kill "$child" 2>/dev/null
  done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trace=(strace -f -ttt -T -yy -qq --seccomp-bpf
  -e trace=read,readv,writev,write,pwrite64,fdatasync,sendto,recvfrom,epoll_wait)
start() { # label command args... ; prints the bound address
  local label=$1
  shift
  "${trace[@]}" -o "$out/$label.st" "$bin" "$@" >"$work/$label.out" 2>"$work/$label.err" &
  echo $! >"$work/$label.pid"
  for _ in $(seq 100); do
    addr=$(sed -n 's/.*listening on //p' "$work/$label.out")
    [ -n "$addr" ] && { echo "$addr"; return; }
    sleep 0.1
  done
  echo "$label did not start" >&2; cat "$work/$label.err" >&2; exit 1
}
replica=$(start replica dupreplica --listen 127.0.0.1:0 --data-dir "$work/replica")
server=$(start server dupserver --listen 127.0.0.1:0 --data-dir "$work/server" --replica "$replica")
sleep 0.5
echo "load: $(uptime)"
"${trace[@]}" -o "$out/bench.st" "$bin" bench dup --target "$server" --total "$TOTAL" \
  --connections "$CONNECTIONS" --pipeline "$PIPELINE"
python3 scripts/dup_hops.py "$out"
