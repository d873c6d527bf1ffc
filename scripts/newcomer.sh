#!/usr/bin/env bash
# A newcomer's first hour, as the README tells it: runs the README's first command and every
# command of its "Your first crawl" section, in order, on a fresh clone of HEAD in a temporary
# directory, and fails on a hang (each command has a timeout), a non-zero exit or a panic.
#
#   scripts/newcomer.sh                  # a fresh clone; the binary CI built (target/debug)
#   scripts/newcomer.sh --here           # this checkout instead of a clone
#   CRAWLFLEET_BIN=path/to/crawlfleet scripts/newcomer.sh
#
# It builds nothing: `crawlfleet` is the binary `cargo test` built ($CARGO_TARGET_DIR/debug, or
# target/debug), standing in for `cargo run --release --` and for the installed binary. HOME is
# a temporary directory, so the default data directory and `crawlfleet init ~/...` land there.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
here=false
[ "${1:-}" = --here ] && here=true

bin=${CRAWLFLEET_BIN:-${CARGO_TARGET_DIR:-$src/target}/debug/crawlfleet}
[ -x "$bin" ] || { echo "newcomer: no binary at $bin (run cargo build or cargo test first)" >&2; exit 1; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

work=$(mktemp -d "${TMPDIR:-/tmp}/crawlfleet-newcomer.XXXXXX")
cleanup() {
    # The background commands of the walk-through (the example site's server).
    jobs -p | xargs -r kill 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/home" "$work/bin"
ln -s "$bin" "$work/bin/crawlfleet"

if $here; then
    repo=$src
else
    git clone -q "$src" "$work/crawlfleet"
    repo=$work/crawlfleet
fi
cd "$repo"

# The README's first command, with the built binary for `cargo run --release --`; then the
# fenced sh blocks of "## Your first crawl", up to the next section.
first=$(grep -m1 '^cargo run --release -- up' README.md | sed 's/#.*//')
walk=$(awk '/^## Your first crawl/{on=1; next} /^## /{on=0} on && /^```/{fence=!fence; next} on && fence' README.md)
[ -n "$first" ] && [ -n "$walk" ] || { echo "newcomer: README has no first command or walk-through" >&2; exit 1; }

script=$work/walk.sh
{
    echo 'set -euo pipefail'
    echo "${first/cargo run --release --/crawlfleet}"
    printf '%s\n' "$walk"
} | sed 's/[[:space:]]*#.*$//' | grep -v '^[[:space:]]*$' | while IFS= read -r line; do
    case "$line" in
        set\ *|kill\ *) printf '%s\n' "$line" ;;
        # A server started in the background: the next command waits until it listens (a
        # newcomer types slower than this script runs them).
        *'&')
            printf '%s\n' "$line"
            port=$(printf '%s\n' "$line" | sed -n 's/.*http\.server \([0-9][0-9]*\).*/\1/p')
            if [ -n "$port" ]; then
                printf 'for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/%s) 2>/dev/null && break; sleep 0.1; done\n' "$port"
            fi
            ;;
        # Every command in the foreground has two minutes.
        *) printf 'echo %q >&2; timeout 120 %s\n' "+ $line" "$line" ;;
    esac
done > "$script.tmp"
mv "$script.tmp" "$script"

log=$work/walk.log
status=0
env HOME="$work/home" PATH="$work/bin:$PATH" XDG_STATE_HOME= RUST_LOG=warn \
    bash "$script" >"$log" 2>&1 || status=$?
if [ "$status" != 0 ] || grep -q 'panicked' "$log"; then
    cat "$log"
    case "$status" in
        124) echo "newcomer: a command did not finish within 120 s" >&2 ;;
        0) echo "newcomer: a command panicked" >&2 ;;
        *) echo "newcomer: a command failed (status $status)" >&2 ;;
    esac
    exit 1
fi
cat "$log"
grep '^+ ' "$log" | sed 's/^+ /newcomer: ok /'
echo "newcomer: the README's commands ran ($(grep -c '^+ ' "$log") commands)"
