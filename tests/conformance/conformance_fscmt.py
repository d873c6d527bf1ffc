"""MS-FSCMT conformance scenarios, the peer side of tests/conformance_fscmt.rs: each plays a
spec-following node scheduler, multinode scheduler or duplicate server (fscmt_peer.py, marshal
only) against a real crawlfleet role the Rust test started, and names the section it checks.

Usage: conformance_fscmt.py SCENARIO ARGS...
"""
import marshal
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


def one_node_per_ip(base, restarts):
    """MS-FSCMT 3.2.5.11 / 3.1.5.21: one node scheduler per IP address. The Rust side starts
    the multinode scheduler and two node schedulers and tells their pids and the multinode
    scheduler's administrative address; once both nodes are registered the collection is added
    (CollectionAdd, MS-FSCADM 2.2.9.3), so that its sites are routed over both. The Rust side
    then kills and restarts the multinode scheduler `restarts` times mid-crawl (a line on stdin
    each time); the web records which process made each request and no address ever serves two
    node schedulers at once."""
    ips = ["%s.%d" % (base, i) for i in range(1, 5)]
    web = Web([ip for ip in ips for _ in range(3)], delay=0.01)
    pids = [int(p) for p in sys.stdin.readline().split()]
    admin = sys.stdin.readline().strip()
    web.pids = pids
    s = xc.ServerProxy("http://%s/RPC2" % admin)
    deadline = time.time() + 60
    while len(s.GetNodeSchedulerXmlRpcPorts()) < len(pids):
        check(time.time() < deadline, "both node schedulers registered")
        time.sleep(0.02)
    r = s.CollectionAdd(web_config("ips", web.sites()), 0)
    check(r[0] == 1, "CollectionAdd: %r" % (r,))
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


# MS-FSCADM 2.2.5, the structure of a CMD_UM_STAT's PKT_DATA (MS-FSCMT 2.2.4.6): every key
# and its type (double: a float, int, string, dictionary, array).
FLAT_KEYS = {
    "ActiveSites": int, "Processed": float, "Downloaded": float, "Modified": float,
    "Stored": float, "Deleted": float, "ReadNet": float, "WriteNet": float, "DocSize": float,
    "DocSizeAvg": float, "DocSizeMax": float, "Retries": float, "NodeSchedulerFwd": float,
    "LocalFwd": float, "Local": float, "Epoch": int, "LastRefresh": int, "Feeding": int,
    "CrawlMode": str, "MimeType": dict, "HTTPResponse": dict, "Uptime": float,
    "DLTime": float, "DLTimeAvg": float, "DLTimeMax": float, "Status": str, "URISkip": dict,
    "DocSkip": dict, "DocumentStore": int, "Progress": list, "FirstUpdate": float,
    "StatUpdate": float, "DocRate": float, "DataRateIn": float, "DataRateOut": float,
    "PPFailed": float, "PPSucceeded": float, "PPFed": float, "PPDeleted": float,
    "PPAdded": float, "PPModified": float, "PPURLsChange": float, "PPChecksums": float,
}
STATUS_WORDS = ["Crawling", "Zombie", "Suspended", "Disk full", "Compacting",
                "Variable delay suspended"]


def check_flat(r):
    """A 2.2.5 structure: every key, of its type."""
    missing = [k for k in FLAT_KEYS if k not in r]
    check(not missing, "CMD_UM_STAT lacks %d keys of MS-FSCADM 2.2.5: %r" % (len(missing),
                                                                           missing))
    bad = [(k, r[k]) for k, typ in FLAT_KEYS.items() if not isinstance(r[k], typ)]
    check(not bad, "2.2.5 types: %r" % bad)
    check(r["Status"] in STATUS_WORDS, "Status is a 2.2.5 word: %r" % r["Status"])
    check(len(r["Progress"]) == 2 and isinstance(r["Progress"][1], str),
          "Progress is [percent, text]: %r" % (r["Progress"],))
    check(r["DocumentStore"] == r["Stored"] - r["Modified"] - r["Deleted"],
          "DocumentStore = Stored - Modified - Deleted: %r" % r)


def total(reports, key, epoch=None):
    return sum(r[key] for r in reports if epoch is None or r["Epoch"] == epoch)


def node_with_site(base, name):
    """A multinode scheduler (this peer) with one node, a collection `name` crawling a sized
    web of one site. Returns (connection, web, site)."""
    web = Web(["%s.1" % base], sized=True)
    site = web.sites()[0]
    ip = site.split(":")[0]
    mn = Listener()
    announce(port=mn.port)
    c = mn.accept()
    check(c.recv()["cm"] == "CMD_UM_INIT", "CMD_UM_INIT first")
    conf = {"start_uris": [], "delay": 0.0, "include_domains": [ip], "robots": 0}
    c.send("CMD_ADM_CONF_ADD", dn=name, ds={name: conf})
    return c, web, site


def stats_until(c, name, reports, done, what, limit=60):
    """Reads the node's messages, granting every START_CRAWL_IP and routing every URI back to
    the node, and keeps the CMD_UM_STAT
    structures of `name` (each checked against 2.2.5) until `done(reports)`."""
    end = time.time() + limit
    while not done(reports):
        check(time.time() < end, "%s within %s s: %d reports, Downloaded %r" % (
            what, limit, len(reports), total(reports, "Downloaded")))
        m = c.poll(0.5)
        if m is None:
            continue
        if m["cm"] == "CMD_UM_KEEPALIVE":
            c.send("CMD_UM_KEEPALIVE_ACK")
        elif m["cm"] == "CMD_UM_START_CRAWL_IP":
            pd = m["pd"]
            c.send("CMD_UM_START_CRAWL_IP", dn=m["dn"], pd=(pd[0], pd[1], pd[2], 1))
        elif m["cm"] in ("CMD_UM_URI", "CMD_UM_URI_URG"):
            # 3.2.5.5: routed back to the node, the only one.
            c.send(m["cm"], dn=m["dn"], pd=m["pd"])
        elif m["cm"] == "CMD_UM_STAT" and m["dn"] == name:
            check_flat(m["pd"])
            reports.append(m["pd"])


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def node_stat_keys(base):
    """MS-FSCMT 2.2.4.6 / 3.1.6 CMD_UM_STAT, PKT_DATA as MS-FSCADM 2.2.5: a node scheduler
    sends every key of the structure with what it means: DocSizeAvg / DocSizeMax and
    DLTimeAvg / DLTimeMax per document, ReadNet every byte read from the web servers (heads
    included), WriteNet every byte written to them (the requests), the counts of what it
    crawled, its state, and the rates."""
    c, web, site = node_with_site(base, "k")
    sizes = [1000, 3000, 5000]
    for n in sizes:
        c.send("CMD_UM_URI", dn="k", pd=queue_entry("http://%s/%d" % (site, n)))
    reports = []
    stats_until(c, "k", reports, lambda r: total(r, "Downloaded") >= 3 and
                total(r, "Stored") >= 3, "three documents crawled and stored")
    check(total(reports, "Downloaded") == 3 and total(reports, "Processed") == 3,
          "3 processed and downloaded: %r" % reports)
    # 2.2.5 DocSizeAvg "Average web document size", DocSizeMax "Maximum web document size".
    check(total(reports, "DocSize") == sum(sizes), "DocSize %r" % total(reports, "DocSize"))
    for r in reports:
        if r["Downloaded"] > 0:
            check(close(r["DocSizeAvg"], r["DocSize"] / r["Downloaded"]),
                  "DocSizeAvg is per document: %r" % r)
            check(r["DocSizeMax"] in sizes, "DocSizeMax is a document's size: %r" % r)
            check(close(r["DLTimeAvg"], r["DLTime"] / r["Downloaded"]),
                  "DLTimeAvg is per document: %r" % r)
            check(0 < r["DLTimeMax"] <= r["DLTime"] + 1e-9, "DLTimeMax is a download's: %r" % r)
    check(max(r["DocSizeMax"] for r in reports) == max(sizes), "the largest document")
    # 2.2.4.9 ReadNet / WriteNet: bytes on the HTTP connections, both ways.
    check(total(reports, "ReadNet") == web.bytes_out,
          "ReadNet %r = bytes the web wrote %r" % (total(reports, "ReadNet"), web.bytes_out))
    check(total(reports, "WriteNet") == web.bytes_in,
          "WriteNet %r = bytes the web read %r" % (total(reports, "WriteNet"), web.bytes_in))
    check(any(r["DataRateIn"] > 0 and r["DataRateOut"] > 0 and r["DocRate"] > 0
              for r in reports), "rates of the reports that downloaded")
    last = reports[-1]
    check(all(r["Epoch"] == 0 for r in reports), "the first refresh cycle is 0")
    check(last["Status"] == "Crawling" and last["Feeding"] == 1, "state: %r" % last)
    check(last["Uptime"] > 0 and last["LastRefresh"] > 0, "Uptime, LastRefresh: %r" % last)
    check(all(r["FirstUpdate"] <= r["StatUpdate"] for r in reports), "FirstUpdate <= StatUpdate")
    check(total(reports, "PPAdded") == 3 and total(reports, "PPModified") == 0,
          "PPAdded 3 new documents")
    check(last["PPChecksums"] == 3, "3 unique checksums: %r" % last["PPChecksums"])
    check(total(reports, "DocumentStore") == 3, "DocumentStore adds up to 3")
    hist = {}
    for r in reports:
        for k, v in r["HTTPResponse"].items():
            hist[k] = hist.get(k, 0) + v
    check(hist == {"200": 3}, "HTTPResponse %r" % hist)
    c.close()
    return {"reports": len(reports), "read": web.bytes_out, "written": web.bytes_in}


def node_stat_deletes(base):
    """MS-FSCMT 3.1.5.15 CMD_UM_DELETE_SITE and 3.1.5.16 CMD_UM_DELETE_URIS: the deleted
    documents count in the CMD_UM_STAT's Deleted, and DocumentStore (MS-FSCADM 2.2.5:
    Stored - Modified - Deleted) goes down with them."""
    c, web, site = node_with_site(base, "d")
    for n in (1000, 2000, 3000, 4000):
        c.send("CMD_UM_URI", dn="d", pd=queue_entry("http://%s/%d" % (site, n)))
    reports = []
    stats_until(c, "d", reports, lambda r: total(r, "Stored") >= 4, "four documents stored")
    check(total(reports, "DocumentStore") == 4, "4 in the store")
    c.send("CMD_UM_DELETE_URIS", dn="d",
           pd=({site: ["http://%s/1000" % site]}, {"errcode": "USR"}))
    stats_until(c, "d", reports, lambda r: total(r, "Deleted") >= 1, "Deleted after DELETE_URIS")
    check(total(reports, "Deleted") == 1 and total(reports, "DocumentStore") == 3,
          "one deleted, 3 left: %r" % reports[-1])
    c.send("CMD_UM_DELETE_SITE", dn="d", pd=site)
    stats_until(c, "d", reports, lambda r: total(r, "Deleted") >= 4, "Deleted after DELETE_SITE")
    check(total(reports, "Deleted") == 4 and total(reports, "DocumentStore") == 0,
          "every document deleted: %r" % reports[-1])
    c.close()
    return {"deleted": total(reports, "Deleted")}


def node_stat_cycles(base):
    """MS-FSCADM 2.2.4.5 statistics cycles and 2.2.4.9 Epoch, in the node's CMD_UM_STAT: what
    was crawled before a CMD_ADM_CONF_REFRESH (MS-FSCMT 3.1.5.9) is reported with Epoch 0,
    what comes after with Epoch 1; every report is of one cycle."""
    c, web, site = node_with_site(base, "r")
    for n in (1000, 2000):
        c.send("CMD_UM_URI", dn="r", pd=queue_entry("http://%s/%d" % (site, n)))
    reports = []
    stats_until(c, "r", reports, lambda r: total(r, "Downloaded") >= 2, "cycle 0 crawled")
    # 2.2.3.10: (None: the whole collection, 0x2: refresh it all).
    c.send("CMD_ADM_CONF_REFRESH", dn="r", pd=(None, 2))
    c.send("CMD_UM_URI", dn="r", pd=queue_entry("http://%s/3000" % site))
    # Cycle 1 fetches the two stored documents again and the new one.
    stats_until(c, "r", reports, lambda r: total(r, "Downloaded", 1) >= 3, "cycle 1 crawled")
    check(total(reports, "Downloaded", 0) == 2, "cycle 0 has its 2 downloads: %r"
          % [(r["Epoch"], r["Downloaded"]) for r in reports])
    check(total(reports, "Downloaded", 1) == 3, "cycle 1 has its 3")
    check(total(reports, "DocSize", 1) == 6000, "cycle 1's documents")
    epochs = [r["Epoch"] for r in reports]
    check(epochs == sorted(epochs), "cycle 0 reports come before cycle 1's: %r" % epochs)
    first = min(r["LastRefresh"] for r in reports if r["Epoch"] == 1)
    check(all(r["LastRefresh"] <= first for r in reports if r["Epoch"] == 0),
          "cycle 1 began after cycle 0")
    c.close()
    return {"epochs": epochs}


def flat(epoch, **kv):
    """A complete 2.2.5 structure as a spec node scheduler sends it: zeros but `kv`."""
    r = {k: (t() if t in (dict, list, str) else t(0)) for k, t in FLAT_KEYS.items()}
    r.update({"Epoch": epoch, "Status": "Crawling", "Feeding": 1, "Progress": [0, ""],
              "LastRefresh": int(time.time()), "Uptime": time.time() - 100,
              "FirstUpdate": time.time() - 60, "StatUpdate": time.time()})
    for k, v in kv.items():
        r[k] = float(v) if FLAT_KEYS[k] is float else v
    r["DocumentStore"] = int(r["Stored"] - r["Modified"] - r["Deleted"])
    return r


def mn_aggregates_per_cycle(mn_addr, admin_addr):
    """MS-FSCMT 3.2.5.6 Receiving a CMD_UM_STAT Message ("update the crawl statistics
    database"), read through MS-FSCADM 2.2.10.6 CollectionGetStatistics2 and 2.2.10.5: two
    node schedulers (this peer) report 2.2.5 structures of refresh cycles 0 and 1, one of
    cycle 0 late; the multinode scheduler aggregates each in its cycle ("cur" is cycle 1,
    "prev" cycle 0, "complete" both), every key as what it means: counts add up, DocSizeAvg
    and DLTimeAvg are over every document, the Max keys the largest, ActiveSites the nodes'
    sum, DocumentStore = Stored - Modified - Deleted, histograms per bucket."""
    n1 = Conn.connect(mn_addr)
    init(n1, "p1")
    n1.wait("CMD_ADM_CONF_ADD")
    n2 = Conn.connect(mn_addr)
    init(n2, "p2")
    n2.wait("CMD_ADM_CONF_ADD")
    sends = [
        (n1, flat(0, Processed=4, Downloaded=4, Stored=4, DocSize=4000, DocSizeAvg=1000,
                  DocSizeMax=1500, DLTime=2.0, DLTimeAvg=0.5, DLTimeMax=0.9, ReadNet=5000,
                  WriteNet=400, PPFed=4, PPAdded=4, LocalFwd=7, Local=9, Retries=1,
                  NodeSchedulerFwd=2, HTTPResponse={"200": 4}, MimeType={"text/html": 4},
                  ActiveSites=2, PPChecksums=4.0)),
        (n2, flat(0, Processed=1, Downloaded=1, Stored=1, DocSize=6000, DocSizeAvg=6000,
                  DocSizeMax=6000, DLTime=3.0, DLTimeAvg=3.0, DLTimeMax=3.0, ReadNet=6200,
                  WriteNet=100, PPFed=1, PPAdded=1, HTTPResponse={"200": 1},
                  MimeType={"text/plain": 1}, ActiveSites=3, PPChecksums=1.0)),
        (n1, flat(1, Processed=2, Downloaded=2, Stored=2, Modified=1, Deleted=1,
                  DocSize=500, DocSizeAvg=250, DocSizeMax=300, DLTime=1.0, DLTimeAvg=0.5,
                  DLTimeMax=0.6, ReadNet=900, WriteNet=200, PPModified=1, PPDeleted=1,
                  HTTPResponse={"200": 1, "404": 1}, ActiveSites=1, PPChecksums=4.0)),
        # Late: cycle 0 of the second node, after cycle 1 began.
        (n2, flat(0, Processed=1, Downloaded=1, Stored=1, DocSize=100, DocSizeAvg=100,
                  DocSizeMax=100, DLTime=0.5, DLTimeAvg=0.5, DLTimeMax=0.5, ReadNet=300,
                  WriteNet=100, HTTPResponse={"200": 1}, ActiveSites=3, PPChecksums=2.0)),
    ]
    for conn, r in sends:
        conn.send("CMD_UM_STAT", dn="web", pd=r)
        time.sleep(0.2)  # in this order (the test waits for the result, not for the time)
    s = xc.ServerProxy("http://%s/RPC2" % admin_addr)
    end = time.time() + 30
    while True:
        ok, d = s.CollectionGetStatistics2("web")
        if ok == 1 and d.get("complete", {}).get("Downloaded") == 8:
            break
        check(time.time() < end, "the reports reach the statistics: %r" % (d,))
        time.sleep(0.2)
    cur, prev, comp = d["cur"], d.get("prev"), d["complete"]
    check(prev is not None, "a previous cycle: %r" % list(d))
    check(cur["Epoch"] == 1 and prev["Epoch"] == 0, "Epochs cur %r prev %r"
          % (cur["Epoch"], prev["Epoch"]))
    expect = {
        "cur": (cur, {"Downloaded": 2, "Processed": 2, "Stored": 2, "Modified": 1,
                      "Deleted": 1, "DocSize": 500, "DocSizeAvg": 250, "DocSizeMax": 300,
                      "DLTime": 1.0, "DLTimeAvg": 0.5, "DLTimeMax": 0.6, "ReadNet": 900,
                      "WriteNet": 200, "PPModified": 1, "PPDeleted": 1, "DocumentStore": 0}),
        "prev": (prev, {"Downloaded": 6, "Processed": 6, "Stored": 6, "DocSize": 10100,
                        "DocSizeAvg": 10100 / 6, "DocSizeMax": 6000, "DLTime": 5.5,
                        "DLTimeAvg": 5.5 / 6, "DLTimeMax": 3.0, "ReadNet": 11500,
                        "WriteNet": 600, "PPFed": 5, "PPAdded": 5, "LocalFwd": 7, "Local": 9,
                        "Retries": 1, "NodeSchedulerFwd": 2, "DocumentStore": 6}),
        "complete": (comp, {"Downloaded": 8, "DocSize": 10600, "DocSizeAvg": 10600 / 8,
                            "DocSizeMax": 6000, "DLTimeMax": 3.0, "ReadNet": 12400,
                            "WriteNet": 800, "Deleted": 1, "DocumentStore": 6}),
    }
    for slot, (got, want) in expect.items():
        bad = {k: (got.get(k), v) for k, v in want.items()
               if got.get(k) is None or not close(float(got[k]), float(v))}
        check(not bad, "%s: (got, expected) %r" % (slot, bad))
    check(cur["HTTPResponse"] == {"200": 1.0, "404": 1.0}, "cur HTTPResponse %r"
          % cur["HTTPResponse"])
    check(prev["HTTPResponse"] == {"200": 6.0}, "prev HTTPResponse %r" % prev["HTTPResponse"])
    check(prev["MimeType"] == {"text/html": 4.0, "text/plain": 1.0}, "prev MimeType %r"
          % prev["MimeType"])
    # ActiveSites: each node's latest, summed (2.2.4.10 SumActiveSites).
    check(cur["ActiveSites"] == 1 + 3, "ActiveSites %r" % cur["ActiveSites"])
    st = marshal.loads(s.CollectionGetStatistics("web").data)
    delta, cycles = st[b"web"]
    check(0 in cycles and 1 in cycles and b"cOmPIEtE" in cycles,
          "cycles 0 and 1 (2.2.4.5): %r" % list(cycles))
    n1.close()
    n2.close()
    return {"cur": cur["Downloaded"], "prev": prev["Downloaded"]}


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
    "node_stat_keys": node_stat_keys,
    "node_stat_deletes": node_stat_deletes,
    "node_stat_cycles": node_stat_cycles,
    "mn_aggregates_per_cycle": mn_aggregates_per_cycle,
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
