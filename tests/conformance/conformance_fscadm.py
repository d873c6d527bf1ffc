"""MS-FSCADM conformance scenarios, the client side of tests/conformance_fscadm.rs: Python's
unmodified xmlrpc.client against a real role, each scenario naming the section it checks.

Usage: conformance_fscadm.py SCENARIO ADDR ARGS...
"""
import marshal
import os
import socket
import sys
import time
import xmlrpc.client as xc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fscmt_peer import announce, check, start, t  # noqa: E402
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


def sub_config(name, sites, sub_sites):
    """A collection (MS-FSCCFG XML) crawling `sites` ("ip:port") from their roots, without
    delay or robots.txt, with a SubDomain "docs" (a crawl subcollection) taking in the hosts of
    `sub_sites`."""
    members = "".join("<member>http://%s/</member>" % s for s in sites)
    ips = "".join("<member>%s</member>" % s.split(":")[0] for s in sites)
    sub_ips = "".join("<member>%s</member>" % s.split(":")[0] for s in sub_sites)
    return """<?xml version="1.0"?>
<CrawlerConfig><DomainSpecification name="%s">
<attrib name="start_uris" type="list-string">%s</attrib>
<attrib name="include_domains" type="list-string">%s</attrib>
<attrib name="delay" type="real">0</attrib>
<attrib name="robots" type="boolean">no</attrib>
<SubDomain name="docs"><attrib name="include_domains" type="list-string">%s</attrib></SubDomain>
</DomainSpecification></CrawlerConfig>""" % (name, members, ips, sub_ips)


def per_site(web):
    """site -> path -> times requested."""
    out = {}
    for ip, port, path in (r[:3] for r in web.requests()):
        d = out.setdefault("%s:%d" % (ip, port), {})
        d[path] = d.get(path, 0) + 1
    return out


def wait_for(what, cond, limit=60):
    end = time.time() + limit
    while not cond():
        check(time.time() < end, what)
        time.sleep(0.05)


def settle(web, quiet=1.0, limit=30):
    """Waits until the web has had no request for `quiet` seconds."""
    end = time.time() + limit
    while True:
        log = web.requests()
        last = max((r[4] for r in log), default=0)
        if log and time.time() - last >= quiet:
            return
        check(time.time() < end, "the crawl settles within %s s" % limit)
        time.sleep(0.1)


PAGES = 7  # /, /1 ... /6 per site


def refetch_subcollection(base, tmp, addr):
    """2.2.9.13 CollectionRefetch with a SubCollection: "the refetch process MUST only apply
    to the specified crawl subcollection": every page of the subcollection's site is requested
    again, no page of the other site is; a SubCollection the collection does not have is an
    error (2.2.7: a fault, faultCode 1, naming it) and fetches nothing."""
    web = Web(["%s.1" % base, "%s.2" % base], pages=PAGES)
    docs, other = web.sites()
    path = os.path.join(tmp, "refetch.xml")
    with open(path, "w") as f:
        f.write(sub_config("r", [docs, other], [docs]))
    announce(config=path)
    s = proxy(addr)
    wait_for("both sites crawled", lambda: all(
        len(per_site(web).get(x, {})) == PAGES for x in (docs, other)))
    settle(web)
    before = per_site(web)
    check(all(n == 1 for x in before.values() for n in x.values()),
          "each page fetched once by the first crawl: %r" % before)
    r = s.CollectionRefetch("r", "docs")
    check(r[0] == 1, "CollectionRefetch of the subcollection: %r" % (r,))
    wait_for("every page of the subcollection's site requested again: %r" % per_site(web),
             lambda: all(n == 2 for n in per_site(web)[docs].values()), 30)
    settle(web)
    after = per_site(web)
    check(after[other] == before[other], "the other site is not refetched: %r" % after[other])
    check(all(n == 2 for n in after[docs].values()), "each page once more: %r" % after[docs])
    n = len(web.requests())
    text = fault_of(s.CollectionRefetch, "r", "nope")
    check("nope" in text, "the fault names the subcollection: %r" % text)
    time.sleep(1.5)
    check(len(web.requests()) == n, "an unknown subcollection fetches nothing: %d requests"
          % (len(web.requests()) - n))
    return {"docs": after[docs], "other": after[other]}


def site_config(name, starts, ips):
    """A collection crawling from `starts` (URIs) the hosts `ips`, without delay or robots."""
    members = "".join("<member>%s</member>" % u for u in starts)
    hosts = "".join("<member>%s</member>" % ip for ip in ips)
    return """<?xml version="1.0"?>
<CrawlerConfig><DomainSpecification name="%s">
<attrib name="start_uris" type="list-string">%s</attrib>
<attrib name="include_domains" type="list-string">%s</attrib>
<attrib name="delay" type="real">0</attrib>
<attrib name="robots" type="boolean">no</attrib>
</DomainSpecification></CrawlerConfig>""" % (name, members, hosts)


def site_stats(s, coll, site):
    """CollectionGetSiteStatistics: the pyfastmarshal structure (2.2.10.4), read with
    CPython's marshal, byte strings as text."""
    return t(marshal.loads(s.CollectionGetSiteStatistics(coll, site).data))


def attrs(schema):
    """A 2.2.4.7 schema instance's attributes: name -> (aggregation type, value)."""
    out = {}
    for kind in ("continuous", "discrete", "histogram", "multidimension", "multidiscrete"):
        for name, value in schema.get(kind, []):
            out[name] = (kind, value)
    return out


SITE_SCHEMA = {  # 2.2.4.9: attribute -> aggregation type
    "Processed": "continuous", "Downloaded": "continuous", "Stored": "continuous",
    "Modified": "continuous", "Deleted": "continuous", "Unchanged": "continuous",
    "DBUpdates": "continuous", "ReadNet": "continuous", "WriteNet": "continuous",
    "HasLastMod": "continuous", "HasETag": "continuous", "DLTime": "continuous",
    "DocSize": "continuous", "Retries": "continuous", "HasSitemap": "continuous",
    "NodeSchedulerFwd": "continuous", "LocalFwd": "continuous", "Local": "continuous",
    "LastUri": "discrete", "QueueLength": "discrete", "CrawlStarted": "discrete",
    "CrawlEnded": "discrete", "Epoch": "discrete", "LastRefresh": "discrete",
    "HTTPResponse": "histogram", "URISkip": "histogram", "DocSkip": "histogram",
    "MimeType": "histogram",
}


def site_schema(d, coll, site):
    """Checks the structure of 2.2.4 for a site (2.2.4.1 with the crawl site in place of the
    collection, no "global"; 2.2.4.3 the tuple (delta, cycles); 2.2.4.5 cycles keyed by int
    from 0 and "cOmPIEtE"; 2.2.4.7 / 2.2.4.9 each a "siteschema" named after the site whose
    attributes are the site schema's, each of the length-4 form of its aggregation type).
    Returns the complete cycle's attributes."""
    check("global" not in d, "no \"global\" key for a site (2.2.4): %r" % list(d))
    check(site in d, "the site's key %r: %r" % (site, list(d)))
    check(coll in d.get("dspec", {}), "dspec names the collection: %r" % d.get("dspec"))
    tup = d[site]
    check(isinstance(tup, tuple) and len(tup) == 2, "(delta, cycles) (2.2.4.3): %r" % (tup,))
    delta, cycles = tup
    ints = [k for k in cycles if isinstance(k, int)]
    check(ints and min(ints) >= 0, "numbered cycles from 0 (2.2.4.5): %r" % list(cycles))
    check("cOmPIEtE" in cycles, "the complete cycle (2.2.4.5): %r" % list(cycles))
    for sch in [delta] + list(cycles.values()):
        check(sch.get("__schemaname__") == "siteschema", "siteschema: %r" % sch)
        check(sch.get("name") == site, "named after the site: %r" % sch.get("name"))
        for name, (kind, value) in attrs(sch).items():
            check(SITE_SCHEMA.get(name) == kind, "%s is a %s attribute of 2.2.4.9, not %s"
                  % (name, SITE_SCHEMA.get(name), kind))
            check(isinstance(value, list) and len(value) == 4, "%s: 4 elements (2.2.4.6): %r"
                  % (name, value))
            if kind == "histogram":
                check(value[1] == "None" and value[2] == "None", "histogram form: %r" % value)
    return attrs(cycles["cOmPIEtE"])


def val(a, name, default=0):
    return a[name][1][0] if name in a else default


def dead_port(ip):
    """A port on `ip` nobody listens on (connections are refused)."""
    x = socket.socket()
    x.bind((ip, 0))
    port = x.getsockname()[1]
    x.close()
    return port


def served(web, site):
    """(requests, 200 responses' body bytes, status histogram) the web saw for a site."""
    rs = [r for r in web.requests() if "%s:%d" % r[:2] == site]
    hist = {}
    for r in rs:
        hist[str(r[6])] = hist.get(str(r[6]), 0) + 1
    return len(rs), sum(r[7] for r in rs if r[6] == 200), hist


def site_statistics(base, tmp, addr, data):
    """2.2.10.4 CollectionGetSiteStatistics on a standalone node scheduler: per crawl site,
    the structure of 2.2.4 / 2.2.4.9, whose Processed, Downloaded, DocSize, HTTPResponse,
    DocSkip (connection refused: "co"), LastUri, CrawlStarted / CrawlEnded and Epoch agree
    with what the web served; the sites' Processed add up to the collection's; an unknown site
    is a fault; and the statistics survive a restart (3.3.1 "MUST also be persisted")."""
    web = Web(["%s.1" % base, "%s.2" % base], pages=PAGES, missing=("/6",))
    a, b = web.sites()
    dead = "%s.3:%d" % (base, dead_port("%s.3" % base))
    path = os.path.join(tmp, "sites.xml")
    ips = [x.split(":")[0] for x in (a, b, dead)]
    with open(path, "w") as f:
        f.write(site_config("st", ["http://%s/" % x for x in (a, b, dead)], ips))
    announce(config=path)
    s = proxy(addr)
    wait_for("both sites crawled", lambda: all(
        len(per_site(web).get(x, {})) == PAGES for x in (a, b)))
    settle(web)

    def agreed():
        for site in (a, b):
            try:
                st = site_schema(site_stats(s, "st", site), "st", site)
            except xc.Fault:
                return False
            if val(st, "Processed") != served(web, site)[0] or val(st, "CrawlEnded") == 0:
                return False
        return True

    wait_for("site statistics catch up with the web", agreed, 30)
    got = {}
    for site in (a, b):
        st = site_schema(site_stats(s, "st", site), "st", site)
        n, size, hist = served(web, site)
        check(val(st, "Downloaded") == n, "Downloaded %r, the web answered %d"
              % (st.get("Downloaded"), n))
        check(val(st, "DocSize") == size, "DocSize %r, the web served %d bytes"
              % (st.get("DocSize"), size))
        check(val(st, "ReadNet") >= size, "ReadNet %r >= %d" % (st.get("ReadNet"), size))
        check(val(st, "HTTPResponse", {}) == hist, "HTTPResponse %r, the web answered %r"
              % (st.get("HTTPResponse"), hist))
        check(val(st, "LastUri", "").startswith("http://%s/" % site), "LastUri %r"
              % (st.get("LastUri"),))
        check(val(st, "Epoch") >= 1, "a crawl of the site began (Epoch): %r" % (st.get("Epoch"),))
        check(val(st, "CrawlEnded") >= val(st, "CrawlStarted") > 0,
              "the crawl began and ended: %r %r" % (st.get("CrawlStarted"), st.get("CrawlEnded")))
        got[site] = {k: v[1][0] for k, v in st.items()}
    check(got[a]["HTTPResponse"].get("404") == 1, "the missing page: %r" % got[a])
    wait_for("the refused connection counted", lambda: val(site_schema(
        site_stats(s, "st", dead), "st", dead), "DocSkip", {}).get("co", 0) >= 1, 30)
    dst = site_schema(site_stats(s, "st", dead), "st", dead)
    check(val(dst, "Processed") >= 1 and "HTTPResponse" not in dst,
          "requested, never answered: %r" % dst)

    def summed():
        total = sum(val(site_schema(site_stats(s, "st", x), "st", x), "Processed")
                    for x in (a, b, dead))
        return total == s.CollectionGetStatistics2("st")[1]["complete"]["Processed"]

    wait_for("the sites' Processed add up to the collection's", summed, 30)
    for bad in ("127.0.0.9:1", "nosite.example"):
        text = fault_of(s.CollectionGetSiteStatistics, "st", bad)
        check("no statistics" in text, "an unknown site: %r" % text)
    # Persisted: the Rust side restarts the node once the file holds the ended crawls.
    file = os.path.join(data, "site-statistics")

    def saved():
        try:
            with open(file, "rb") as f:
                d = t(marshal.load(f))
        except (OSError, ValueError, EOFError):
            return False
        recs = d["collections"].get("st", {})
        return all(x in recs and recs[x][6] > 0 for x in (a, b))

    wait_for("the site statistics file written", saved, 30)
    before = len(web.requests())
    announce(restart=1)
    check(sys.stdin.readline().strip() == "restarted", "the Rust side restarted the node")
    s = proxy(addr)
    for site in (a, b):
        st = site_schema(site_stats(s, "st", site), "st", site)
        again = [r for r in web.requests()[before:] if "%s:%d" % r[:2] == site]
        check(val(st, "Processed") == got[site]["Processed"] + len(again),
              "Processed after the restart: %r, before %r (+%d)"
              % (st.get("Processed"), got[site]["Processed"], len(again)))
        check(val(st, "HTTPResponse", {}).get("200", 0) >= got[site]["HTTPResponse"]["200"],
              "HTTPResponse kept: %r" % (st.get("HTTPResponse"),))
    return {x: {"Processed": got[x]["Processed"], "DocSize": got[x]["DocSize"]} for x in got}


def site_statistics_multinode(base, tmp, addr):
    """2.2.10.4 CollectionGetSiteStatistics on a multinode scheduler: each site's statistics
    come from the node scheduler that crawls it (2.2.9.10 names it) and agree with what the
    web served; the node's own answer is the same; an unknown site is a fault."""
    web = Web(["%s.%d" % (base, i) for i in range(1, 5)], pages=5)
    sites = web.sites()
    path = os.path.join(tmp, "mnsites.xml")
    with open(path, "w") as f:
        f.write(site_config("ms", ["http://%s/" % x for x in sites],
                            [x.split(":")[0] for x in sites]))
    announce(config=path)
    s = proxy(addr)
    wait_for("every site crawled", lambda: all(
        len(per_site(web).get(x, {})) == 5 for x in sites), 90)
    settle(web)

    def agreed(site):
        def f():
            try:
                st = site_schema(site_stats(s, "ms", site), "ms", site)
            except xc.Fault:
                return False
            return val(st, "Processed") == served(web, site)[0] and val(st, "CrawlEnded") > 0
        return f

    nodes = {}
    for site in sites:
        wait_for("the statistics of %s through the multinode scheduler" % site, agreed(site), 30)
        cycles = site_stats(s, "ms", site)[site][1]
        st = attrs(cycles["cOmPIEtE"])
        n, size, hist = served(web, site)
        check(val(st, "DocSize") == size and val(st, "HTTPResponse", {}) == hist,
              "%s: DocSize %r HTTPResponse %r, the web %d %r"
              % (site, st.get("DocSize"), st.get("HTTPResponse"), size, hist))
        ok, where = s.CollectionGetSiteRoutingAddress("ms", site)
        check(ok == 1, "the site is routed: %r" % (where,))
        node = xc.ServerProxy("http://%s:%d/RPC2" % tuple(where))
        own = site_stats(node, "ms", site)[site][1]
        check(own == cycles, "the node's own answer is the multinode scheduler's: %r / %r"
              % (own, cycles))
        nodes.setdefault("%s:%d" % tuple(where), []).append(site)
    text = fault_of(s.CollectionGetSiteStatistics, "ms", "127.0.0.9:1")
    check("no statistics" in text, "an unknown site: %r" % text)
    return {"sites_per_node": {k: len(v) for k, v in nodes.items()}}


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
    "site_statistics": site_statistics,
    "site_statistics_multinode": site_statistics_multinode,
    "set_log_level": set_log_level,
    "malformed_arguments": malformed_arguments,
    "refetch_subcollection": refetch_subcollection,
}

if __name__ == "__main__":
    start(SCENARIOS)
