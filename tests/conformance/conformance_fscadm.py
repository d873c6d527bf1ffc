"""MS-FSCADM conformance scenarios, the client side of tests/conformance_fscadm.rs: Python's
unmodified xmlrpc.client against a real role, each scenario naming the section it checks.

Usage: conformance_fscadm.py SCENARIO ADDR ARGS...
"""
import os
import sys
import time
import xmlrpc.client as xc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marshal  # noqa: E402

from fscmt_peer import check, start  # noqa: E402
from web import Web  # noqa: E402

COLLECTION = """<?xml version="1.0"?>
<CrawlerConfig><DomainSpecification name="%s">
<attrib name="start_uris" type="list-string"></attrib>
<attrib name="include_domains" type="list-string"><member>%s</member></attrib>
<attrib name="delay" type="real">0</attrib>
<attrib name="robots" type="boolean">no</attrib>
</DomainSpecification></CrawlerConfig>"""


def proxy(addr):
    s = xc.ServerProxy("http://%s/RPC2" % addr)
    end = time.time() + 30
    while True:
        try:
            s.GetLogLevel()
            return s
        except OSError:
            check(time.time() < end, "the administrative interface answers")
            time.sleep(0.1)


def set_log_level(addr):
    """2.2.8.6 SetLogLevel: "MUST return 1 if the method succeeds, 0 otherwise"; a level that
    is no mask of the 2.2.3.5 levels answers 0 (not a fault) and leaves the level as it was;
    2.2.8.1 GetLogLevel reads it back."""
    s = proxy(addr)
    check(s.SetLogLevel(0x04 | 0x10) == 1, "a valid level answers 1")
    check(s.GetLogLevel() == 0x14, "GetLogLevel reads it back")
    for bad in (0x1000, 0, -1):
        check(s.SetLogLevel(bad) == 0, "SetLogLevel(%#x) answers 0" % bad)
    check(s.GetLogLevel() == 0x14, "the level is unchanged after a failed SetLogLevel")


def fault_of(call, *args):
    try:
        r = call(*args)
    except xc.Fault as f:
        check(f.faultCode == 1, "faultCode 1 (2.2.7): %r" % f.faultCode)
        return f.faultString
    sys.exit("check failed: expected a fault from %r, got %r" % (args, r))


def malformed_arguments(addr):
    """2.2.2.2 hostport and 2.2.2.3 contentdest: a Site or Destination argument that is not
    one gets a fault (2.2.7) naming the argument; a well-formed one goes on to the method
    (here: the collection does not exist)."""
    s = proxy(addr)
    bad_sites = ["", "a b.com", "www.a.com/x", "www.a.com:0", "www.a.com:99999", "[::1",
                 "[nope]:80", "a..com", "www.a.com:8x"]
    site_calls = [
        (s.CollectionDeleteSite, lambda x: ("c", x), 2),
        (s.CollectionGetSiteRoutingAddress, lambda x: ("c", x), 2),
        (s.CollectionPreemptSite, lambda x: ("c", x), 2),
        (s.CollectionQuarantineSite, lambda x: ("c", x, 60), 2),
        (s.CollectionReprocessSite, lambda x: ("c", "", x), 3),
        (s.CollectionReprocessSitePrefix, lambda x: ("c", x, "http://a/", ""), 2),
    ]
    for call, args, pos in site_calls:
        for bad in bad_sites:
            text = fault_of(call, *args(bad))
            check("argument %d (Site)" % pos in text, "the fault names Site: %r" % text)
        for good in ["www.a.com:80", "127.0.0.1:8080", "[::1]:80", "www.a.com"]:
            text = fault_of(call, *args(good))
            check("(Site)" not in text, "%r is a hostport: %r" % (good, text))
    bad_dests = ["default:", "default:a b", "two words", "tab\there"]
    dest_calls = [
        (s.CollectionSuspendFeeding, lambda x: ("c", x), 2),
        (s.CollectionResumeFeeding, lambda x: ("c", x), 2),
        (s.CollectionReprocessSite, lambda x: ("c", x, "www.a.com:80"), 2),
        (s.CollectionReprocessSitePrefix, lambda x: ("c", "www.a.com:80", "http://a/", x), 4),
        (s.CollectionReprocessURI, lambda x: ("c", x, ["http://a/"]), 2),
    ]
    for call, args, pos in dest_calls:
        for bad in bad_dests:
            text = fault_of(call, *args(bad))
            check("argument %d (Destination)" % pos in text,
                  "the fault names Destination: %r" % text)
        for good in ["", "default:web", "web_dest"]:
            text = fault_of(call, *args(good))
            check("(Destination)" not in text, "%r is a contentdest: %r" % (good, text))


def stats2(s, name):
    ok, d = s.CollectionGetStatistics2(name)
    check(ok == 1, "CollectionGetStatistics2: %r" % (d,))
    return d


def wait_stats(s, name, cond, what, limit=60):
    """CollectionGetStatistics2 until `cond(answer)`."""
    end = time.time() + limit
    while True:
        d = stats2(s, name)
        if cond(d):
            return d
        check(time.time() < end, "%s within %s s: %r" % (what, limit, d.get("cur")))
        time.sleep(0.2)


def sized_collection(s, base, name):
    """A collection crawling a web of one site whose /N is N bytes. Returns (web, site)."""
    web = Web(["%s.1" % base], sized=True)
    site = web.sites()[0]
    r = s.CollectionAdd(COLLECTION % (name, site.split(":")[0]), 0)
    check(r[0] == 1, "CollectionAdd: %r" % (r,))
    return web, site


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def statistics_by_cycle(addr, base):
    """2.2.10.6 CollectionGetStatistics2: "cur" MUST contain the statistics of the current
    refresh cycle, "prev" those of the previous one; 2.2.4.9 Epoch is the cycle's number;
    2.2.5 DocSizeAvg / DocSizeMax per document; ReadNet / WriteNet every byte on the HTTP
    connections; 2.2.10.5 and 2.2.4.5: the cycles by number. A CollectionRefetch (2.2.9.13)
    starts cycle 1 between two crawls."""
    s = proxy(addr)
    web, site = sized_collection(s, base, "cyc")
    r = s.AddURIs("cyc", 0, ["http://%s/1000" % site, "http://%s/2000" % site])
    check(r[0] == 1, "AddURIs: %r" % (r,))
    d = wait_stats(s, "cyc", lambda d: d["cur"]["Stored"] >= 2, "cycle 0 crawled")
    check(d["cur"]["Epoch"] == 0 and "prev" not in d, "cycle 0, no previous: %r" % (d,))
    check(s.CollectionRefetch("cyc", "")[0] == 1, "CollectionRefetch")
    check(s.AddURIs("cyc", 0, ["http://%s/3000" % site])[0] == 1, "AddURIs")
    # Cycle 1 fetches the two stored documents again and the new one.
    d = wait_stats(s, "cyc", lambda d: d["cur"]["Downloaded"] >= 3 and "prev" in d,
                   "cycle 1 crawled")
    cur, prev, comp = d["cur"], d["prev"], d["complete"]
    check(cur["Epoch"] == 1 and prev["Epoch"] == 0, "Epochs: cur %r, prev %r"
          % (cur["Epoch"], prev["Epoch"]))
    check(prev["Downloaded"] == 2 and cur["Downloaded"] == 3 and comp["Downloaded"] == 5,
          "downloads per cycle: prev %r cur %r complete %r"
          % (prev["Downloaded"], cur["Downloaded"], comp["Downloaded"]))
    check(prev["DocSize"] == 3000 and close(prev["DocSizeAvg"], 1500)
          and prev["DocSizeMax"] == 2000, "prev documents: %r" % prev)
    check(cur["DocSize"] == 6000 and close(cur["DocSizeAvg"], 2000)
          and cur["DocSizeMax"] == 3000, "cur documents: %r" % cur)
    check(prev["LastRefresh"] <= cur["LastRefresh"], "cycle 1 began after cycle 0")
    check(comp["ReadNet"] == web.bytes_out and comp["WriteNet"] == web.bytes_in,
          "ReadNet %r / WriteNet %r = the web's %r / %r" % (
              comp["ReadNet"], comp["WriteNet"], web.bytes_out, web.bytes_in))
    st = marshal.loads(s.CollectionGetStatistics("cyc").data)
    _, cycles = st[b"cyc"]
    check(0 in cycles and 1 in cycles, "cycles 0 and 1 (2.2.4.5): %r" % list(cycles))
    return {"prev": prev["Downloaded"], "cur": cur["Downloaded"]}


def statistics_after_deletes(addr, base):
    """2.2.9.5 CollectionDeleteSite and 2.2.9.6 CollectionDeleteURIs: the documents deleted
    count in 2.2.5 Deleted, and DocumentStore (Stored - Modified - Deleted) goes down."""
    s = proxy(addr)
    web, site = sized_collection(s, base, "del")
    uris = ["http://%s/%d" % (site, n) for n in (1000, 2000, 3000)]
    check(s.AddURIs("del", 0, uris)[0] == 1, "AddURIs")
    wait_stats(s, "del", lambda d: d["cur"]["Stored"] >= 3, "three stored")
    check(s.CollectionDeleteURIs("del", uris[:1])[0] == 1, "CollectionDeleteURIs")
    d = wait_stats(s, "del", lambda d: d["cur"]["Deleted"] >= 1, "Deleted after DeleteURIs")
    check(d["cur"]["Deleted"] == 1 and d["cur"]["DocumentStore"] == 2, "one deleted: %r"
          % d["cur"])
    check(s.CollectionDeleteSite("del", site)[0] == 1, "CollectionDeleteSite")
    d = wait_stats(s, "del", lambda d: d["cur"]["Deleted"] >= 3, "Deleted after DeleteSite")
    check(d["cur"]["Deleted"] == 3 and d["cur"]["DocumentStore"] == 0
          and d["complete"]["DocumentStore"] == 0, "all deleted: %r" % d["cur"])
    return {"deleted": d["cur"]["Deleted"]}


SCENARIOS = {
    "statistics_by_cycle": statistics_by_cycle,
    "statistics_after_deletes": statistics_after_deletes,
    "set_log_level": set_log_level,
    "malformed_arguments": malformed_arguments,
}

if __name__ == "__main__":
    start(SCENARIOS)
