#!/usr/bin/env bash
# Crawl throughput of a whole crawlfleet cluster against wrk (the machine's limit of fetching
# from nginx on loopback), Scrapy and spider_cli, in one run, on the same plain synthetic web
# served by nginx; RUNS runs (default 5), each peer's figure and each ratio reported as the
# median over the runs, then one run each of `crawlfleet bench route` and `crawlfleet bench
# links` (ROUTE_LINKS=0 skips them) to watch the routing and link store rates.
# Installs nginx and wrk (Debian packages), Scrapy (in a virtualenv under target/) and spider_cli
# (cargo install, under target/) when they are missing; each spider mode runs until it ends or
# for SPIDER_TIMEOUT seconds. Everything the bench starts (nginx, scrapy, spider, the cluster)
# ends with it; the web's files are removed. Extra arguments go to `crawlfleet bench crawl`
# (e.g. --web 20:500).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
NODES=${NODES:-2}
RUNS=${RUNS:-5}
venv=${VENV:-target/bench-crawl-venv}
spider_root=${SPIDER_ROOT:-target/bench-crawl-spider}
# spider_cli 2.53.9, the newest release and the one issue 28's trial ran. Every 2.x release has
# the same `crawl` command (the crawl runs as a task; without --output-links `main` returns before
# it fetches anything, which bench/src/spider.rs works around), so no other 2.x release fares
# better; 1.x awaited the crawl but is the 2024 engine, not the crawler the issue names.
SPIDER_VERSION=${SPIDER_VERSION:-2.53.9}
# The most seconds either spider mode runs before its processes are stopped.
SPIDER_TIMEOUT=${SPIDER_TIMEOUT:-600}

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
spider=$spider_root/bin/spider
if ! [ -x "$spider" ]; then
  spider=$(command -v spider || true)
fi
if [ -z "$spider" ] || ! "$spider" --version 2>/dev/null | grep -q "$SPIDER_VERSION"; then
  cargo install --quiet --locked --root "$spider_root" --version "$SPIDER_VERSION" \
    spider_cli --no-default-features
  spider=$spider_root/bin/spider
fi
# `crawlfleet bench` runs the crawlfleet-bench executable built beside it.
cargo build --release --quiet -p crawlfleet -p crawlfleet-bench
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq "$RUNS"); do
  echo "== run $i of $RUNS" >&2
  RUST_LOG=${RUST_LOG:-warn} target/release/crawlfleet bench crawl \
    --duration "$DURATION" --nodes "$NODES" --python "$venv/bin/python" --spider "$spider" \
    --spider-timeout "$SPIDER_TIMEOUT" --json "$@" | tee -a "$out"
done
python3 - "$out" <<'EOF'
import json, statistics, sys

runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(vals), 2) if vals else None
def show(label, key, unit=""):
    vals = [r.get(key) for r in runs]
    m = med(key)
    print(f"{label:<34} median {m if m is not None else '-':>10}{unit}   runs: {vals}")
print(f"\n{len(runs)} runs, {runs[0]['hosts']} hosts x {runs[0]['pages_per_host']} pages, "
      f"{runs[0]['nodes']} nodes, {runs[0]['connections_per_site']} connections per site; "
      f"complete in every run: {all(r['complete'] for r in runs)}")
show("crawlfleet pages/s", "rate")
show("crawlfleet pages/s at the web", "web_rate")
show("  cluster start to first answer, s", "start_lag")
show("  last answer to cluster end, s", "end_lag")
show("wrk requests/s", "wrk_rate")
show("scrapy pages/s", "scrapy_rate")
show("spider (concurrent) pages/s", "spider_rate")
show("spider (concurrent) pages fetched", "spider_pages")
show("spider (concurrent) hosts whole", "spider_complete_hosts")
show("spider --sync pages/s", "spider_sync_rate")
show("spider --sync pages fetched", "spider_sync_pages")
show("spider --sync hosts whole", "spider_sync_complete_hosts")
show("crawlfleet / wrk", "ratio_wrk")
show("crawlfleet at the web / wrk", "ratio_wrk_web")
show("crawlfleet / scrapy", "ratio_scrapy")
show("crawlfleet / spider (concurrent)", "ratio_spider")
show("crawlfleet / spider --sync", "ratio_spider_sync")
# The 2x target is against the spider mode that fetched every page in every run.
hosts = runs[0]["hosts"]
for mode, prefix in (("concurrent", "spider"), ("--sync", "spider_sync")):
    whole = [r.get(prefix + "_complete_hosts") for r in runs]
    if all(w == hosts for w in whole):
        print(f"spider {mode} fetched every page in every run: crawlfleet / it "
              f"median {med('ratio_' + prefix)}")
    elif any(w is not None for w in whole):
        print(f"spider {mode} did not fetch every page (hosts whole per run: {whole})")
EOF
if [ "${ROUTE_LINKS:-1}" != 0 ]; then
  echo "== routing (bench route) and link store (bench links)"
  target/release/crawlfleet bench route --json
  target/release/crawlfleet bench links --json
fi
