#!/usr/bin/env python3
"""Where a replicated PPDUP_ADD window's time goes, hop by hop, from three strace logs.

Reads `bench.st`, `server.st` and `replica.st` in DIR, as `scripts/trace-dup.sh` writes them
(`strace -f -ttt -T -yy` of `crawlfleet bench dup`, `crawlfleet dupserver --replica` and
`crawlfleet dupreplica`), merges them by timestamp and prints:

- the median of each hop of a window, from the load generator's write of a window of adds to
  its next write on the same connection (node connections are told from the server-replica
  link by the load generator's ports);
- for each side, its record fdatasyncs, split by whether a chunk of the log's grower thread
  (its zeros written and synced) was under way, and the grower's time at work.

Usage: dup_hops.py DIR
"""

import bisect
import re
import statistics
import sys
from collections import Counter

LINE = re.compile(r"(\d+)\s+([\d.]+) (.*)")
TCP = re.compile(r"TCP:\[127\.0\.0\.1:(\d+)->127\.0\.0\.1:(\d+)\]")
# A window of adds is far larger than anything else the generator writes (its hello).
WINDOW_BYTES = 100_000
# The grower writes its zeros 64 KiB at a time.
GROWER_WRITE = 64 << 10


class Call:
    __slots__ = ("ts", "proc", "tid", "name", "fd", "ret", "dur")

    def __init__(self, ts, proc, tid, name, fd, ret, dur):
        self.ts, self.proc, self.tid, self.name = ts, proc, tid, name
        self.fd, self.ret, self.dur = fd, ret, dur

    @property
    def end(self):
        return self.ts + self.dur


def fd_label(rest):
    """`wal`, `eventfd`, the socket's two ports as `a-b`, or ''."""
    m = TCP.search(rest.split(",", 1)[0])
    if m:
        return "%s-%s" % m.groups()
    head = rest.split(",", 1)[0]
    if "wal-" in head:
        return "wal"
    if "eventfd" in head:
        return "eventfd"
    return ""


def read_trace(path, proc):
    calls, pending = [], {}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            tid, ts, rest = m.group(1), float(m.group(2)), m.group(3)
            if "<unfinished ...>" in rest:
                pending[tid] = (ts, rest)
                continue
            if rest.startswith("<... "):
                start, first = pending.pop(tid, (ts, ""))
                rest = first.split("<unfinished")[0] + rest.split("resumed>", 1)[-1]
                ts = start
            name = rest.split("(", 1)[0]
            dur = re.search(r"<([\d.]+)>$", rest)
            ret = re.search(r"= (-?\d+)", rest)
            calls.append(
                Call(
                    ts,
                    proc,
                    tid,
                    name,
                    fd_label(rest),
                    int(ret.group(1)) if ret else 0,
                    float(dur.group(1)) if dur else 0.0,
                )
            )
    return calls


def median_ms(values):
    return statistics.median(values) * 1000 if values else float("nan")


def quantile_ms(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[int(q * (len(s) - 1))] * 1000


def next_after(calls, times, t):
    i = bisect.bisect_left(times, t)
    return calls[i] if i < len(calls) else None


def hops(calls):
    # Node connections: the load generator's local ports; every other socket pair of the
    # server and the replica is their link.
    node_ports = {}
    for c in calls:
        if c.proc == "bench" and "-" in c.fd:
            local = c.fd.split("-")[0]
            node_ports.setdefault(local, "n%d" % (len(node_ports) + 1))

    def conn(fd):
        if "-" not in fd:
            return fd
        a, b = fd.split("-")
        return node_ports.get(a) or node_ports.get(b) or "link"

    for c in calls:
        c.fd = conn(c.fd)
    io = [c for c in calls if c.name in ("read", "writev") and c.ret > 0]

    def select(proc, name, fd=None, node=False):
        out = [
            c
            for c in io
            if c.proc == proc
            and c.name == name
            and (fd is None or c.fd == fd)
            and (not node or c.fd.startswith("n"))
        ]
        return out, [c.ts for c in out]

    per_window = {k: [] for k in ("in", "server", "out", "generator", "window")}
    for n in sorted(set(node_ports.values())):
        sends = [c for c in io if c.proc == "bench" and c.name == "writev" and c.fd == n and c.ret > WINDOW_BYTES]
        for a, b in zip(sends, sends[1:]):
            within = lambda proc, name: [c for c in io if c.proc == proc and c.name == name and c.fd == n and a.ts <= c.ts < b.ts]
            sr, sw, br = within("server", "read"), within("server", "writev"), within("bench", "read")
            if not (sr and sw and br):
                continue
            per_window["in"].append(sr[0].ts - a.ts)
            per_window["server"].append(sw[-1].end - sr[0].ts)
            per_window["out"].append(br[-1].ts - sw[-1].ts)
            per_window["generator"].append(b.ts - br[-1].end)
            per_window["window"].append(b.ts - a.ts)

    node_reads, node_read_t = select("server", "read", node=True)
    fwd, fwd_t = select("server", "writev", "link")
    oks_in, oks_in_t = select("server", "read", "link")
    answers, answers_t = select("server", "writev", node=True)
    r_reads, r_reads_t = select("replica", "read", "link")
    r_writes, r_writes_t = select("replica", "writev", "link")
    wal = [c for c in calls if c.proc == "replica" and c.fd == "wal"]
    grower = grower_tid(wal)
    r_log = [c for c in wal if c.name == "pwrite64" and c.tid != grower]
    r_log_t = [c.ts for c in r_log]
    r_syncs = record_syncs(wal, grower)
    r_syncs_t = [c.ts for c in r_syncs]

    def gaps(froms, to, to_t, start=lambda c: c.ts):
        out = []
        for c in froms:
            n = next_after(to, to_t, start(c))
            if n:
                out.append(n.ts - start(c))
        return out

    log_written, sync_wait, sync_time, answered = [], [], [], []
    for r in r_reads:
        p = next_after(r_log, r_log_t, r.ts)
        s = p and next_after(r_syncs, r_syncs_t, p.end)
        w = s and next_after(r_writes, r_writes_t, s.end)
        if not w:
            continue
        log_written.append(p.ts - r.ts)
        sync_wait.append(s.ts - p.end)
        sync_time.append(s.dur)
        answered.append(w.ts - s.end)

    rows = [
        ("generator writes a window -> server's loop reads it", per_window["in"]),
        ("server reads a node window -> next forwards written", gaps(node_reads, fwd, fwd_t)),
        ("forwards written -> replica's loop reads them", gaps(fwd, r_reads, r_reads_t)),
        ("replica reads forwards -> its log written", log_written),
        ("replica's log written -> its fdatasync starts", sync_wait),
        ("replica's fdatasync", sync_time),
        ("its fdatasync returns -> its _OKs written", answered),
        ("_OKs written -> server's loop reads them", gaps(r_writes, oks_in, oks_in_t)),
        ("server reads _OKs -> next answers to a node written", gaps(oks_in, answers, answers_t)),
        ("server: reads a window -> writes its last answers", per_window["server"]),
        ("answers written -> generator reads them", per_window["out"]),
        ("generator: last answer read -> next window written", per_window["generator"]),
        ("window", per_window["window"]),
    ]
    print("| hop | median, ms |")
    print("|---|---:|")
    for name, values in rows:
        print("| %s | %.2f |" % (name, median_ms(values)))
    print("(%d windows)" % len(per_window["window"]))


def grower_tid(wal):
    """The thread writing the log's zeros: the one making 64 KiB writes."""
    counts = Counter(c.tid for c in wal if c.name == "pwrite64" and c.ret == GROWER_WRITE)
    return counts.most_common(1)[0][0] if counts else None


def record_syncs(wal, grower):
    """The fdatasyncs of the thread that makes most of them, the grower's aside."""
    counts = Counter(c.tid for c in wal if c.name == "fdatasync" and c.tid != grower)
    if not counts:
        return []
    syncer = counts.most_common(1)[0][0]
    return [c for c in wal if c.name == "fdatasync" and c.tid == syncer]


def syncs(calls, proc):
    wal = [c for c in calls if c.proc == proc and c.fd == "wal"]
    grower = grower_tid(wal)
    chunks, start = [], None
    for c in wal:
        if c.tid != grower:
            continue
        if c.name == "pwrite64" and start is None:
            start = c.ts
        elif c.name == "fdatasync":
            chunks.append((c.ts if start is None else start, c.end))
            start = None
    starts = [a for a, _ in chunks]

    def meets_chunk(c):
        i = bisect.bisect_right(starts, c.end)
        return any(a < c.end and b > c.ts for a, b in chunks[max(0, i - 2) : i])

    records = record_syncs(wal, grower)
    met = [c.dur for c in records if meets_chunk(c)]
    clear = [c.dur for c in records if not meets_chunk(c)]
    print(
        "%s: %d record fdatasyncs; %d meeting a grower chunk, median %.2f ms (p90 %.2f); "
        "%d others, median %.2f ms (p90 %.2f); grower: %d chunks, at work %.0f ms"
        % (
            proc,
            len(records),
            len(met),
            median_ms(met),
            quantile_ms(met, 0.9),
            len(clear),
            median_ms(clear),
            quantile_ms(clear, 0.9),
            len(chunks),
            sum(b - a for a, b in chunks) * 1000,
        )
    )


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    calls = []
    for proc in ("bench", "server", "replica"):
        calls.extend(read_trace("%s/%s.st" % (d, proc), proc))
    calls.sort(key=lambda c: c.ts)
    for proc in ("server", "replica"):
        syncs(calls, proc)
    hops(calls)


if __name__ == "__main__":
    main()
