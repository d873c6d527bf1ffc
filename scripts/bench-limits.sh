#!/usr/bin/env bash
# What a hostile client costs each role with a port, on loopback, against the limits every port
# keeps (DESIGN.md "Limits every port keeps"), with `crawlfleet bench flood`:
#   - the duplicate server while one client sends PPDUP_ADD for FLOOD_SECONDS without reading;
#   - a standalone node's administrative port while one client pipelines XML-RPC calls for
#     FLOOD_SECONDS without reading;
#   - 32 connections each holding a partial 60 MiB message against every role with a port:
#     duplicate server, multinode scheduler (FSCMT port and administrative port), node
#     (administrative port), link store.
# Each case runs on a role started fresh for it, so its peak resident memory (sampled VmRSS, and
# VmHWM) is that case's; a well-behaved client makes one round trip at a time throughout.
# The administrative ports run with --admin-max-body 64 MiB so that a 60 MiB body is within the
# limit, as a 60 MiB frame is on the FSCMT and link store ports (the default, 16 MiB, answers 413
# at once). Bounded: every role started is stopped at the end. Needs python3 (free ports, the
# table).
set -euo pipefail
cd "$(dirname "$0")/.."
FLOOD_SECONDS=${FLOOD_SECONDS:-10}
PARTIAL_CONNECTIONS=${PARTIAL_CONNECTIONS:-32}
FRAME_MIB=${FRAME_MIB:-60}

cargo build --release --quiet -p crawlfleet -p crawlfleet-bench
bin=target/release/crawlfleet
bench=target/release/crawlfleet-bench
work=$(mktemp -d)
cleanup() {
  for f in "$work"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# start NAME ARGS...: runs `crawlfleet ARGS` (its pid in $work/NAME.pid) and waits for the line it
# announces itself with; prints that line's last word (the listening address, where it has one).
start() {
  local name=$1
  shift
  RUST_LOG=${RUST_LOG:-warn} "$bin" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  echo $! >"$work/$name.pid"
  for _ in $(seq 100); do
    if [ -s "$work/$name.out" ]; then
      awk '{print $NF; exit}' "$work/$name.out"
      return
    fi
    sleep 0.1
  done
  echo "$name did not start" >&2
  cat "$work/$name.err" >&2
  exit 1
}
stop() {
  kill "$(cat "$work/$1.pid")" 2>/dev/null || true
  rm -f "$work/$1.pid"
}
# flood CASE ROLE-NAME ARGS...: one `bench flood` run against the role, its JSON line kept.
flood() {
  local case=$1 name=$2
  shift 2
  echo "== $case" >&2
  "$bench" flood --pid "$(cat "$work/$name.pid")" --seconds "$FLOOD_SECONDS" --json "$@" |
    python3 -c 'import json, sys; j = json.loads(sys.stdin.read()); j["case"] = sys.argv[1]; print(json.dumps(j))' "$case" \
      >>"$work/results.jsonl"
  stop "$name"
}
big_body=$((64 << 20))
partial=(--connections "$PARTIAL_CONNECTIONS" --frame-mib "$FRAME_MIB")

# (a) PPDUP_ADD never read.
dup=$(start dup-a dupserver --listen 127.0.0.1:0 --data-dir "$work/dup-a")
flood "dupserver: PPDUP_ADD never read" dup-a --load ppdup-add --target "$dup"

# (b) pipelined XML-RPC never read.
admin=127.0.0.1:$(free_port)
start node-b node --standalone --admin "$admin" --data-dir "$work/node-b" >/dev/null
flood "node admin: XML-RPC never read" node-b --load xmlrpc --target "$admin"

# (c) partial 60 MiB messages on 32 connections, each role with a port.
dup=$(start dup-c dupserver --listen 127.0.0.1:0 --data-dir "$work/dup-c")
flood "dupserver: partial frames" dup-c --load partial-fscmt --target "$dup" "${partial[@]}"

admin=127.0.0.1:$(free_port)
mn=$(start mn-c multinode --listen 127.0.0.1:0 --admin "$admin" --admin-max-body "$big_body" \
  --data-dir "$work/mn-c")
flood "multinode: partial frames" mn-c --load partial-fscmt --target "$mn" "${partial[@]}" \
  --probe xmlrpc --probe-target "$admin"

admin=127.0.0.1:$(free_port)
start mn-h multinode --listen 127.0.0.1:0 --admin "$admin" --admin-max-body "$big_body" \
  --data-dir "$work/mn-h" >/dev/null
flood "multinode admin: partial bodies" mn-h --load partial-http --target "$admin" "${partial[@]}"

admin=127.0.0.1:$(free_port)
start node-c node --standalone --admin "$admin" --admin-max-body "$big_body" \
  --data-dir "$work/node-c" >/dev/null
flood "node admin: partial bodies" node-c --load partial-http --target "$admin" "${partial[@]}"

links=$(start links-c linkstore --listen 127.0.0.1:0 --data-dir "$work/links-c")
flood "linkstore: partial messages" links-c --load partial-wasdr --target "$links" "${partial[@]}"

python3 - "$work/results.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'case':34} {'written':>13} {'closed':>7} {'peak RSS':>9} {'VmHWM':>8} {'round trips':>11} {'p50':>8} {'p99':>8}")
for r in rows:
    closed = f"{r['closed']}/{r['connections']}"
    written = f"{r['sent'] / 2**20:.0f} MiB" if r["sent_unit"] == "bytes" else f"{r['sent']} req"
    print(f"{r['case']:34} {written:>13} {closed:>7} {r['rss_peak_mb']:7.0f}MB {r['hwm_mb']:6.0f}MB"
          f" {r['round_trips']:>11} {r['p50_us'] / 1000:6.2f}ms {r['p99_us'] / 1000:6.2f}ms"
          + (f"  probe failed: {r['probe_failure']}" if r['probe_failure'] else ""))
EOF
