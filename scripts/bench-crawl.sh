#!/usr/bin/env bash
# Crawl throughput of a whole crawlfleet cluster against wrk (the machine's limit of fetching
# from nginx on loopback) and Scrapy, in one run, on the same plain synthetic web served by nginx.
# Installs nginx and wrk (Debian packages) and Scrapy (in a virtualenv under target/) when they
# are missing. Everything the bench starts (nginx, scrapy, the cluster) ends with it; the web's
# files are removed. Extra arguments go to `crawlfleet bench crawl` (e.g. --web 20:500 --json).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
NODES=${NODES:-2}
venv=${VENV:-target/bench-crawl-venv}

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
  had_pid=$([ -s /run/nginx.pid ] && echo yes || true)
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx wrk >/dev/null
  # Where the package starts the system nginx (port 80), stop it: the bench runs its own.
  if [ -z "$had_pid" ] && [ -s /run/nginx.pid ]; then nginx -s quit || true; fi
fi
if ! "$venv/bin/python" -c "import scrapy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q scrapy
fi
# `crawlfleet bench` runs the crawlfleet-bench executable built beside it.
cargo build --release --quiet -p crawlfleet -p crawlfleet-bench
RUST_LOG=${RUST_LOG:-warn} target/release/crawlfleet bench crawl \
  --duration "$DURATION" --nodes "$NODES" --python "$venv/bin/python" "$@"
