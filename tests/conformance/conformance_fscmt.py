"""MS-FSCMT conformance scenarios, the peer side of tests/conformance_fscmt.rs: each plays a
spec-following node scheduler, multinode scheduler or duplicate server (fscmt_peer.py, marshal
only) against a real crawlfleet role the Rust test started, and names the section it checks.

Usage: conformance_fscmt.py SCENARIO ARGS...
"""
import os
import sys
import time
import xmlrpc.client as xc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fscmt_peer import Conn, Listener, announce, check, start  # noqa: E402
from web import Web  # noqa: E402

CONF = """<?xml version="1.0"?>
<CrawlerConfig><DomainSpecification name="%s">
<attrib name="start_uris" type="list-string"><member>%s</member></attrib>
<attrib name="delay" type="real">%s</attrib>
</DomainSpecification></CrawlerConfig>"""


def init(conn, node_id):
    # 2.2.4.1 CMD_UM_INIT: PKT_NODE_ID and PKT_XMLRPCPRT (host, port).
    conn.send("CMD_UM_INIT", mi=node_id, xp=("127.0.0.1", 15000))


def entry_uri(entry):
    """The URI of a crawl queue entry (2.2.2.2: "WQE", then the URI structure, 2.2.2.2.4,
    whose first element is the URI)."""
    check(entry[0] == "WQE", "a crawl queue entry starts with WQE: %r" % (entry,))
    return entry[1][0]


def spec_form(m, name):
    """2.2.2.3.1: PKT_DSPEC is a dictionary keyed by the collection name whose value is the
    collection's parameters. Returns those parameters."""
    ds = m.get("ds")
    check(isinstance(ds, dict), "%s has a PKT_DSPEC dictionary: %r" % (m["cm"], m))
    check(list(ds) == [name], "%s PKT_DSPEC is keyed by the collection name %r: keys %r"
          % (m["cm"], name, list(ds)))
    check(m.get("dn") == name, "PKT_DSPECNAME is %r: %r" % (name, m.get("dn")))
    inner = ds[name]
    check(isinstance(inner, dict), "the collection's entry is a dictionary: %r" % (inner,))
    return inner


def mn_sends_spec_conf(mn_addr, admin_addr):
    """2.2.3.11 / 2.2.3.12 with 2.2.2.3.1, from the multinode scheduler: CMD_ADM_CONF_ADD on
    registration (3.2.5.1) and on CollectionAdd, CMD_ADM_CONF_UPDATE when a collection changes,
    each with PKT_DSPEC = {name: {parameters}}."""
    c = Conn.connect(mn_addr)
    init(c, "p1")
    inner = spec_form(c.wait("CMD_ADM_CONF_ADD"), "web")
    check(inner.get("start_uris") == ["http://127.0.0.1:9/"], "start_uris inside: %r" % inner)
    s = xc.ServerProxy("http://%s/RPC2" % admin_addr)
    r = s.CollectionAdd(CONF % ("two", "http://127.0.0.1:9/two", "3.0"), 0)
    check(r[0] == 1, "CollectionAdd: %r" % (r,))
    inner = spec_form(c.wait("CMD_ADM_CONF_ADD"), "two")
    check(inner.get("delay") == 3.0, "delay inside: %r" % inner)
    r = s.CollectionAdd(CONF % ("two", "http://127.0.0.1:9/two", "4.0"), 0)
    check(r[0] == 1, "CollectionAdd (update): %r" % (r,))
    inner = spec_form(c.wait("CMD_ADM_CONF_UPDATE"), "two")
    check(inner.get("delay") == 4.0, "updated delay inside: %r" % inner)
    c.close()


def node_reads_spec_conf():
    """3.1.5.10 / 3.1.5.11 on a node scheduler: a CMD_ADM_CONF_ADD and a CMD_ADM_CONF_UPDATE
    whose PKT_DSPEC follows 2.2.2.3.1 are understood: the node sends the ppdup section to the
    duplicate server it names (PPDUP_SET_CONFIG, PKT_DATA = {name: ppdup section}, 2.2.5.10)
    and, on the update, requeues the start URIs it names (those it has no route for go to the
    multinode scheduler, CMD_UM_URI). The earlier flat form is still read."""
    mn = Listener()
    dup = Listener()
    announce(port=mn.port)
    c = mn.accept()
    m = c.recv()
    check(m["cm"] == "CMD_UM_INIT", "the first message is CMD_UM_INIT (3.1.3): %r" % m)
    dup_addr = "127.0.0.1:%d" % dup.port
    ppdup = {"dupservers": [dup_addr], "compact": 1}
    conf = {"start_uris": ["http://a.example/"], "delay": 1.0, "ppdup": ppdup}
    c.send("CMD_ADM_CONF_ADD", dn="web", ds={"web": conf})
    d = dup.accept()
    sc = d.wait("PPDUP_SET_CONFIG")
    check(sc.get("dn") == "web", "PPDUP_SET_CONFIG names the collection (3.1.5.11): %r" % sc)
    check(sc.get("pd") == {"web": ppdup}, "PKT_DATA is {name: ppdup section}: %r" % sc)
    check(sc.get("vc") == 1, "first vector clock 1: %r" % sc)
    d.send("PPDUP_CONFIG_ACK", vc=sc["vc"])
    ppdup2 = {"dupservers": [dup_addr], "compact": 0}
    conf2 = {"start_uris": ["http://b.example/"], "delay": 1.0, "ppdup": ppdup2}
    c.send("CMD_ADM_CONF_UPDATE", dn="web", ds={"web": conf2})
    sc = d.wait("PPDUP_SET_CONFIG")
    check(sc.get("pd") == {"web": ppdup2}, "the updated ppdup section: %r" % sc)
    check(sc.get("vc") == 2, "next vector clock: %r" % sc)
    d.send("PPDUP_CONFIG_ACK", vc=sc["vc"])
    u = c.wait("CMD_UM_URI")
    check(u.get("dn") == "web", "CMD_UM_URI for the collection: %r" % u)
    check(entry_uri(u["pd"]) == "http://b.example/",
          "the updated start URI is requeued (3.1.5.11): %r" % u)
    # The flat form of earlier versions: no entry named like the collection.
    c.send("CMD_ADM_CONF_ADD", dn="old", ds={"start_uris": [], "ppdup": ppdup})
    sc = d.wait("PPDUP_SET_CONFIG")
    check(sc.get("pd") == {"old": ppdup}, "flat form understood: %r" % sc)
    c.close()
    d.close()


def uri_structure(uri):
    """2.2.2.2.4, not parsed (entry 12 = 0: entries 1-3 and 5-9 empty, 4 None)."""
    return (uri, "", "", "", None, "", "", "", "", "", "http", 1, 0, "")


def queue_entry(uri):
    """2.2.2.2: a crawl queue entry of length 9 with no referrer, flags or trail."""
    return ("WQE", uri_structure(uri), uri_structure(""), 0, 0, [], 0, 0, {})


def web_config(name, sites, start=True):
    """A collection configuration (MS-FSCCFG XML) crawling `sites` ("ip:port") without a
    delay, written for a multinode scheduler's --config."""
    members = "".join("<member>http://%s/</member>" % s for s in sites) if start else ""
    ips = "".join("<member>%s</member>" % s.split(":")[0] for s in sites)
    return """<?xml version="1.0"?>
<CrawlerConfig><DomainSpecification name="%s">
<attrib name="start_uris" type="list-string">%s</attrib>
<attrib name="include_domains" type="list-string">%s</attrib>
<attrib name="delay" type="real">0</attrib>
<attrib name="robots" type="boolean">no</attrib>
</DomainSpecification></CrawlerConfig>""" % (name, members, ips)


def wait_quiet(web, quiet, limit):
    """Waits until the web has had no request for `quiet` seconds; False after `limit`."""
    end = time.time() + limit
    while time.time() < end:
        log = web.requests()
        last = max((r[3] for r in log), default=0)
        if log and time.time() - last >= quiet:
            return True
        time.sleep(0.1)
    return False


def wait_requests(web, n, limit, what):
    end = time.time() + limit
    while len(web.requests()) < n:
        check(time.time() < end, "%s: %d requests, not %d, within %s s"
              % (what, len(web.requests()), n, limit))
        time.sleep(0.05)


def suspend_stops_fetching(base, tmp, admin):
    """MS-FSCMT 3.1.5.4 / 3.1.5.5 through MS-FSCADM CollectionSuspend / CollectionResume
    (2.2.9.20, 2.2.9.18) on the multinode scheduler: once every node scheduler has the
    CMD_ADM_CONF_SUSPEND, no request reaches the web (those open may finish) until
    CMD_ADM_CONF_RESUME; the reported state agrees."""
    web = Web(["%s.%d" % (base, i) for i in range(1, 5)], delay=0.005)
    path = os.path.join(tmp, "susp.xml")
    with open(path, "w") as f:
        f.write(web_config("susp", web.sites()))
    announce(config=path)
    s = xc.ServerProxy("http://%s/RPC2" % admin)
    wait_requests(web, 200, 60, "crawling before the suspension")
    at = len(web.requests())
    r = s.CollectionSuspend("susp")
    check(r[0] == 1, "CollectionSuspend: %r" % (r,))
    check(wait_quiet(web, 1.0, 20), "fetching stops after CollectionSuspend (%d requests)"
          % len(web.requests()))
    n = len(web.requests())
    # Only the requests open when the nodes stopped may finish: a few per site (bounded),
    # not what the nodes had queued.
    check(n - at <= 40, "%d requests after CollectionSuspend" % (n - at))
    time.sleep(2.0)
    check(len(web.requests()) == n, "no request while suspended: %d more"
          % (len(web.requests()) - n))
    fault = None
    try:
        s.CollectionSuspend("susp")
    except xc.Fault as f:
        fault = f
    check(fault is not None and "suspended" in fault.faultString,
          "the state says suspended: %r" % (fault,))
    r = s.CollectionResume("susp")
    check(r[0] == 1, "CollectionResume: %r" % (r,))
    wait_requests(web, n + 50, 60, "crawling after CollectionResume")
    return {"before": n, "after": len(web.requests())}


def one_node_per_ip(base, tmp, restarts):
    """MS-FSCMT 3.2.5.11 / 3.1.5.21: one node scheduler per IP address. The Rust side kills
    and restarts the multinode scheduler `restarts` times mid-crawl (a line on stdin each
    time, then the nodes' pids, then "done"); the web records which process made each request
    and no address ever serves two node schedulers at once."""
    ips = ["%s.%d" % (base, i) for i in range(1, 5)]
    web = Web([ip for ip in ips for _ in range(3)], delay=0.01)
    path = os.path.join(tmp, "ips.xml")
    with open(path, "w") as f:
        f.write(web_config("ips", web.sites()))
    announce(config=path)
    pids = [int(p) for p in sys.stdin.readline().split()]
    web.pids = pids
    marks = []
    for _ in range(int(restarts)):
        wait_requests(web, len(web.requests()) + 100, 60, "crawling before a restart")
        announce(restart=len(marks))
        check(sys.stdin.readline().strip() == "restarted", "the Rust side restarted it")
        marks.append(len(web.requests()))
    wait_requests(web, len(web.requests()) + 100, 60, "crawling after the last restart")
    log = web.requests()
    by = {}
    for r in log:
        by[r[5]] = by.get(r[5], 0) + 1
    check(all(p in by for p in pids), "both nodes crawled: %r" % by)
    bad = web.overlaps()
    check(not bad, "%d pairs of requests to one IP from two nodes at once, e.g. %r"
          % (len(bad), bad[:3]))
    return {"requests": len(log), "by_pid": {str(k): v for k, v in by.items()}}


def preempt_and_requeue(base):
    """MS-FSCMT 3.1.5.13 (CMD_ADM_PREEMPT_SITE) and 3.1.5.18
    (CMD_UM_QUARANTINE_SITE_REQUEUE) on a node scheduler, the test playing its multinode
    scheduler: the site stops (no request starts after the node's CMD_UM_STOP_CRAWL_IP,
    2.2.4.12, until a new START_CRAWL_IP is granted), each START_CRAWL_IP is closed by a STOP
    before the next, and nothing is fetched that was not queued (not the site's root)."""
    web = Web(["%s.1" % base], delay=0.05, leaf=True)
    site = web.sites()[0]
    ip = site.split(":")[0]
    mn = Listener()
    announce(port=mn.port)
    c = mn.accept()
    check(c.recv()["cm"] == "CMD_UM_INIT", "CMD_UM_INIT first")
    conf = {"start_uris": [], "delay": 0.0, "include_domains": [ip], "robots": 0}
    c.send("CMD_ADM_CONF_ADD", dn="p", ds={"p": conf})
    for i in range(1, 61):
        c.send("CMD_UM_URI", dn="p", pd=queue_entry("http://%s/%d" % (site, i)))
    events = []

    def grant(m):
        check(m["pd"][0] == ip and m["pd"][1] == site, "START_CRAWL_IP for the site: %r" % m)
        c.send("CMD_UM_START_CRAWL_IP", dn="p", pd=(m["pd"][0], m["pd"][1], m["pd"][2], 1))
        events.append(("granted", time.time()))

    def stopped():
        m = c.wait("CMD_UM_STOP_CRAWL_IP", seen=seen)
        check(not any(x["cm"] == "CMD_UM_START_CRAWL_IP" for x in seen[:-1]),
              "no new START_CRAWL_IP before the STOP_CRAWL_IP: %r" % [x["cm"] for x in seen])
        check(tuple(m["pd"]) == (ip, site), "STOP_CRAWL_IP names the IP and site: %r" % m)
        events.append(("stopped", time.time()))

    for what in ["CMD_ADM_PREEMPT_SITE", "CMD_UM_QUARANTINE_SITE_REQUEUE"]:
        grant(c.wait("CMD_UM_START_CRAWL_IP"))
        wait_requests(web, len(web.requests()) + 3, 30, "fetching before " + what)
        # 2.2.3.14 PKT_DATA (site, requeue); 2.2.3.20 PKT_DATA (site, seconds).
        c.send(what, dn="p", pd=(site, 1))
        seen = []
        stopped()
        m = c.wait("CMD_UM_START_CRAWL_IP", seen=seen)
        asked = time.time()
        time.sleep(0.5)  # the site waits for its grant: nothing may start meanwhile
        late = [r for r in web.requests() if r[3] > events[-1][1] + 0.2 and r[3] < asked + 0.5]
        check(not late, "%d requests started after %s stopped the site and before a new grant"
              % (len(late), what))
        grant(m)
        wait_requests(web, len(web.requests()) + 3, 30, "fetching again after " + what)
        # Close this START with its STOP before the next round.
        c.send("CMD_ADM_PREEMPT_SITE", dn="p", pd=(site, 1))
        seen = []
        stopped()
    paths = [r[2] for r in web.requests()]
    check("/" not in paths, "the site's root, never queued, is not fetched: %r" % paths)
    return {"requests": len(paths)}


def refused_reclaim_stops_site(base):
    """MS-FSCMT 3.1.5.21 and 3.2.5.11, the test playing a multinode scheduler that restarts: a
    node scheduler crawling a site stops when the connection closes (the grant went with the
    multinode scheduler), re-claims the site's IP on the new connection, and on a refusal (the
    IP went to another node) starts no request until a later START_CRAWL_IP is granted."""
    web = Web(["%s.1" % base], delay=0.05, leaf=True)
    site = web.sites()[0]
    ip = site.split(":")[0]
    mn = Listener()
    announce(port=mn.port)
    c = mn.accept()
    check(c.recv()["cm"] == "CMD_UM_INIT", "CMD_UM_INIT first")
    conf = {"start_uris": [], "delay": 0.0, "include_domains": [ip], "robots": 0}
    c.send("CMD_ADM_CONF_ADD", dn="p", ds={"p": conf})
    for i in range(1, 201):
        c.send("CMD_UM_URI", dn="p", pd=queue_entry("http://%s/%d" % (site, i)))

    def answer(m, allowed):
        check(tuple(m["pd"][:2]) == (ip, site), "START_CRAWL_IP for the site: %r" % m)
        c.send("CMD_UM_START_CRAWL_IP", dn="p", pd=(ip, site, m["pd"][2], allowed))

    answer(c.wait("CMD_UM_START_CRAWL_IP"), 1)
    wait_requests(web, 5, 30, "fetching before the multinode scheduler goes")
    c.close()
    closed = time.time()
    c = mn.accept()
    check(c.recv()["cm"] == "CMD_UM_INIT", "CMD_UM_INIT first on the new connection")
    answer(c.wait("CMD_UM_START_CRAWL_IP"), 0)
    refused = time.time()
    time.sleep(1.0)
    m = c.wait("CMD_UM_START_CRAWL_IP")
    asked = time.time()
    late = [r for r in web.requests() if closed + 0.3 < r[3] < asked]
    check(not late, "%d requests started after the connection closed (%.2f) and before a new "
          "grant (refused at %.2f), first at %.2f" % (len(late), closed, refused,
                                                       late[0][3] if late else 0))
    n = len(web.requests())
    answer(m, 1)
    wait_requests(web, n + 3, 30, "fetching again once granted")
    return {"requests": len(web.requests())}


def quarantine_ends_no_earlier(base):
    """MS-FSCMT 3.1.5.17: the site is blocked "for the duration of the specified time period"
    and crawled again only "after the time period has expired": no request to it starts
    before the seconds asked have passed since the CMD_UM_QUARANTINE_SITE was sent (sent late
    in a second, where a period counted from the whole second would end early)."""
    web = Web(["%s.1" % base], delay=0.02, leaf=True)
    site = web.sites()[0]
    ip = site.split(":")[0]
    mn = Listener()
    announce(port=mn.port)
    c = mn.accept()
    check(c.recv()["cm"] == "CMD_UM_INIT", "CMD_UM_INIT first")
    conf = {"start_uris": [], "delay": 0.0, "include_domains": [ip], "robots": 0}
    c.send("CMD_ADM_CONF_ADD", dn="p", ds={"p": conf})
    for i in range(1, 301):
        c.send("CMD_UM_URI", dn="p", pd=queue_entry("http://%s/%d" % (site, i)))
    results = []
    m = c.wait("CMD_UM_START_CRAWL_IP")
    c.send("CMD_UM_START_CRAWL_IP", dn="p", pd=(ip, site, m["pd"][2], 1))
    for seconds in (1, 2):
        wait_requests(web, len(web.requests()) + 3, 30, "fetching before the quarantine")
        while time.time() % 1.0 < 0.8:
            time.sleep(0.01)
        sent = time.time()
        c.send("CMD_UM_QUARANTINE_SITE", dn="p", pd=(site, seconds))
        m = c.wait("CMD_UM_START_CRAWL_IP")
        c.send("CMD_UM_START_CRAWL_IP", dn="p", pd=(ip, site, m["pd"][2], 1))
        # Requests open when the quarantine began finish within the web's delay.
        end = time.time() + 30
        while not any(r[3] > sent + 0.1 for r in web.requests()):
            check(time.time() < end, "fetching after the quarantine")
            time.sleep(0.02)
        first = min(r[3] for r in web.requests() if r[3] > sent + 0.1)
        check(first >= sent + seconds, "a quarantine of %d s sent at %.3f ended at %.3f"
              % (seconds, sent, first))
        results.append(round(first - sent, 3))
    return {"ended_after": results}


def subcollection_refresh(base):
    """MS-FSCMT 2.2.3.10 / 3.1.5.9 on a node scheduler, the test playing its multinode
    scheduler: CMD_ADM_CONF_REFRESH with PKT_DATA = (subcollection, 0x4) "MUST initiate a
    refresh of the specified ... subcrawl collection": the pages of the subcollection
    (2.2.2.3.1 "subdomains") that the node crawled are requested again, those of the rest of
    the collection are not. A subcollection the collection does not have refreshes nothing
    (the node writes why to the schedule log, CMD_UM_LOG "sc", 2.2.4.8)."""
    web = Web(["%s.1" % base, "%s.2" % base], leaf=True)
    docs, other = web.sites()
    mn = Listener()
    announce(port=mn.port)
    c = mn.accept()
    check(c.recv()["cm"] == "CMD_UM_INIT", "CMD_UM_INIT first")
    ips = [x.split(":")[0] for x in (docs, other)]
    conf = {"start_uris": [], "delay": 0.0, "include_domains": ips, "robots": 0,
            "subdomains": {"docs": {"include_domains": [ips[0]]}}}
    c.send("CMD_ADM_CONF_ADD", dn="p", ds={"p": conf})
    pages = ["/%d" % i for i in range(1, 6)]
    for site in (docs, other):
        for p in pages:
            c.send("CMD_UM_URI", dn="p", pd=queue_entry("http://%s%s" % (site, p)))
    logs = []

    def serve(cond, what, limit=30):
        """Answers the node (START_CRAWL_IP granted, keep-alives) until `cond()`."""
        end = time.time() + limit
        while not cond():
            check(time.time() < end, what)
            m = c.poll(0.05)
            if m is None:
                continue
            if m["cm"] == "CMD_UM_START_CRAWL_IP":
                pd = m["pd"]
                c.send("CMD_UM_START_CRAWL_IP", dn="p", pd=(pd[0], pd[1], pd[2], 1))
            elif m["cm"] == "CMD_UM_KEEPALIVE":
                c.send("CMD_UM_KEEPALIVE_ACK")
            elif m["cm"] == "CMD_UM_LOG":
                logs.append(m)

    def counts(site):
        return [sum(1 for r in web.requests() if "%s:%d" % r[:2] == site and r[2] == p)
                for p in pages]

    def quiet(secs):
        return lambda: time.time() - max((r[4] for r in web.requests()), default=0) >= secs

    serve(lambda: counts(docs) == [1] * 5 and counts(other) == [1] * 5, "the first crawl")
    serve(quiet(1.0), "the first crawl settles")
    c.send("CMD_ADM_CONF_REFRESH", dn="p", pd=("docs", 0x4))
    serve(lambda: counts(docs) == [2] * 5,
          "every page of the subcollection requested again: %r" % counts(docs))
    serve(quiet(1.0), "the refresh settles")
    check(counts(other) == [1] * 5, "the rest of the collection is not refreshed: %r"
          % counts(other))
    check(counts(docs) == [2] * 5, "each page of the subcollection once more: %r"
          % counts(docs))
    n = len(web.requests())
    c.send("CMD_ADM_CONF_REFRESH", dn="p", pd=("nope", 0x4))
    serve(lambda: any(m["pd"][0] == "sc" and "nope" in m["pd"][1] for m in logs),
          "CMD_UM_LOG to the schedule log naming the unknown subcollection: %r" % logs, 10)
    serve(quiet(1.0), "nothing more", 10)
    check(len(web.requests()) == n, "an unknown subcollection refreshes nothing: %d requests"
          % (len(web.requests()) - n))
    return {"docs": counts(docs), "other": counts(other)}


SCENARIOS = {
    "subcollection_refresh": subcollection_refresh,
    "quarantine_ends_no_earlier": quarantine_ends_no_earlier,
    "refused_reclaim_stops_site": refused_reclaim_stops_site,
    "mn_sends_spec_conf": mn_sends_spec_conf,
    "node_reads_spec_conf": node_reads_spec_conf,
    "suspend_stops_fetching": suspend_stops_fetching,
    "one_node_per_ip": one_node_per_ip,
    "preempt_and_requeue": preempt_and_requeue,
}

if __name__ == "__main__":
    start(SCENARIOS)
