"""Drives an FSCADM session with Python's unmodified xmlrpc.client.ServerProxy.

Usage: admin_session.py node ADDR TMPDIR | restart ADDR | multinode ADDR
Exits non-zero with a message on the first failed check.
"""
import marshal
import sys
import time
import xmlrpc.client as xc

CONF = """<?xml version="1.0"?>
<CrawlerConfig><DomainSpecification name="%s">
<attrib name="start_uris" type="list-string"><member>http://127.0.0.1:9/</member></attrib>
<attrib name="delay" type="real">%s</attrib>
</DomainSpecification></CrawlerConfig>"""


def check(cond, what):
    if not cond:
        sys.exit("check failed: " + what)


def fault(call, *args, contains=""):
    try:
        r = call(*args)
    except xc.Fault as f:
        check(f.faultCode == 1, "faultCode is 1 (2.2.7), got %r" % f.faultCode)
        check(contains in f.faultString, "%r in %r" % (contains, f.faultString))
        return f.faultString
    sys.exit("check failed: expected a fault, got %r" % (r,))


def wait(pred, what, secs=20):
    end = time.time() + secs
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    sys.exit("timed out waiting for " + what)


def common(s, role):
    # Argument checking (2.2.8-2.2.10: all arguments MUST be specified).
    fault(s.NoSuchMethod, contains="unknown method")
    fault(s.CollectionGetStatus, contains="takes 1 argument")
    fault(s.CollectionGetStatus, 7, contains="must be a string")
    fault(s.CollectionGetStatus, "nope", contains="no such collection")
    check(s.SetLogLevel(0x1000) == 0, "SetLogLevel of no level answers 0 (2.2.8.6)")
    check(s.SetLogLevel(0x04 | 0x10 | 0x20) == 1, "SetLogLevel")
    check(s.GetLogLevel() == 0x34, "GetLogLevel after SetLogLevel")
    # CollectionAdd: defaults merged (2.2.9.3), then a partial update merged.
    r = s.CollectionAdd(CONF % ("web", "2.0"), 0)
    check(r[0] == 1 and "added" in r[1], "CollectionAdd: %r" % (r,))
    xml = s.CollectionGetConfigurationXML("web")
    check('name="delay"' in xml and "2.0" in xml, "delay in the configuration")
    check('name="refresh"' in xml, "defaults merged into a new collection")
    partial = '<CrawlerConfig><DomainSpecification name="web"><attrib name="refresh" type="real">720</attrib></DomainSpecification></CrawlerConfig>'
    r = s.CollectionAdd(partial, 0)
    check(r[0] == 1 and "updated" in r[1], "CollectionAdd update: %r" % (r,))
    xml = s.CollectionGetConfigurationXML("web")
    check("720" in xml and "2.0" in xml, "partial merged, earlier value kept: " + xml)
    fault(s.CollectionAdd, "<CrawlerConfig><oops", 0, contains="ConfigData")
    check(s.CollectionGetList() == ["web"], "CollectionGetList")
    check(s.CollectionGetStatus("web") == "crawling", "status crawling")
    # AddURIs (4.2 example form).
    r = s.AddURIs("web", 0, ["http://www.contoso.com/", "http://www.contoso.com/about/"])
    check(r == [1, "Queued collection web with 2 URIs"], "AddURIs: %r" % (r,))
    r = s.AddURIs("web", 1, ["not a uri"])
    check(r[0] < 1, "AddURIs of a relative URI fails: %r" % (r,))
    fault(s.AddURIs, "nope", 0, [], contains="no such collection")
    # Suspend / resume: a fault when already in that state (2.2.9.18, 2.2.9.20).
    check(s.CollectionSuspend("web")[0] == 1, "suspend")
    check(s.CollectionGetStatus("web") == "suspended", "status suspended")
    fault(s.CollectionSuspend, "web", contains="already suspended")
    check(s.CollectionResume("web")[0] == 1, "resume")
    fault(s.CollectionResume, "web", contains="not suspended")
    # Feeding per destination.
    check(s.CollectionSuspendFeeding("web", "")[0] == 1, "suspend feeding")
    fault(s.CollectionSuspendFeeding, "web", "", contains="already suspended")
    check(s.CollectionResumeFeeding("web", "")[0] == 1, "resume feeding")
    fault(s.CollectionResumeFeeding, "web", "", contains="not suspended")
    # Refresh-only (2.2.10.1/2).
    check(s.CollectionEnableRefreshOnly("web")[0] == 1, "refresh only on")
    cur = s.CollectionGetStatistics2("web")[1]["cur"]
    check(cur["CrawlMode"] == "Refreshing(limit=user)", "CrawlMode: %r" % cur["CrawlMode"])
    check(s.CollectionDisableRefreshOnly("web")[0] == 1, "refresh only off")
    # Site and URI operations.
    for r in [
        s.CollectionDeleteSite("web", "www.contoso.com:80"),
        s.CollectionDeleteURIs("web", ["http://www.contoso.com/about/"]),
        s.CollectionPreemptSite("web", "www.contoso.com:80"),
        s.CollectionQuarantineSite("web", "www.contoso.com:80", 60),
        s.CollectionRefetch("web", ""),
        s.CollectionRefetchURI("web", "http://www.contoso.com/", 1, 0, 1),
        s.CollectionReprocessSite("web", "", "www.contoso.com:80"),
        s.CollectionReprocessSitePrefix("web", "www.contoso.com:80", "http://www.contoso.com/a", ""),
        s.CollectionReprocessURI("web", "", ["http://www.contoso.com/", "bad"]),
    ]:
        check(r[0] == 1, "cresult %r" % (r,))
    fault(s.CollectionRefetch, "web", "nosub", contains="no subcollection")
    fault(s.CollectionRefetchURI, "web", "http://x/", 2, 0, 0, contains="0 or 1")
    # Statistics: 2.2.10.5 marshalled; 2.2.10.6 flattened; 2.2.10.7 global.
    st = marshal.loads(s.CollectionGetStatistics("web").data)
    check(b"dspec" in st and b"global" in st and b"web" in st, "statistics keys %r" % list(st))
    delta, cycles = st[b"web"]
    check(delta[b"__schemaname__"] == b"collectionschema", "collection schema")
    check(b"cOmPIEtE" in cycles and 0 in cycles or 1 in cycles, "cycles %r" % list(cycles))
    check(st[b"dspec"][b"web"][b"refresh"] == 720, "dspec refresh")
    st = marshal.loads(s.CollectionGetStatistics("").data)
    check(b"web" in st, "all collections")
    ok, d = s.CollectionGetStatistics2("web")
    check(ok == 1 and "cur" in d and "complete" in d, "Statistics2 %r" % (d,))
    for k in ["DocumentStore", "Progress", "DocRate", "Status", "HTTPResponse"]:
        check(k in d["cur"], "flattened %s" % k)
    check(len(d["cur"]["Progress"]) == 2, "Progress pair")
    ok, g = s.GetGlobalStatistics()
    check(ok == 1 and "DNSRate" in g["complete"], "global statistics")
    fault(s.CollectionGetSiteStatistics, "web", "nosite:80", contains="no statistics")
    check(s.IsMultiNodeScheduler() == (1 if role == "multinode" else 0), "IsMultiNodeScheduler")
    check(s.GetSiteManagerNum() == (0 if role == "multinode" else 1), "GetSiteManagerNum")


def node(addr, tmp):
    s = xc.ServerProxy("http://%s" % addr)
    check(s.IsDistributed() == 0, "standalone: IsDistributed 0")
    fault(s.GetNodeSchedulerXmlRpcPorts, contains="not a multinode")
    common(s, "node")
    path = tmp + "/uris.txt"
    with open(path, "w") as f:
        f.write("http://a.example/\nhttp://b.example/x\n\n")
    check(s.AddURIFile("web", 1, path)[1] == "Queued collection web with 2 URIs", "AddURIFile")
    check(s.CollectionDeleteURIFile("web", path)[0] == 1, "DeleteURIFile")
    fault(s.AddURIFile, "web", 0, tmp + "/missing", contains="cannot read")
    r = s.CollectionGetSiteRoutingAddress("web", "a.example:80")
    check(r[0] == 1 and r[1][1] == int(addr.split(":")[1]), "standalone routes to itself %r" % (r,))
    # State kept for the restart check.
    check(s.CollectionSuspend("web")[0] == 1, "suspend before restart")
    check(s.CollectionEnableRefreshOnly("web")[0] == 1, "refresh-only before restart")
    # Delete and add again: a standalone node deletes at once.
    s.CollectionAdd(CONF % ("tmp", "1.0"), 0)
    r = s.CollectionDelete("tmp", 0)
    check(r[0] == 1, "delete %r" % (r,))
    check("tmp" not in s.CollectionGetList(), "deleted")
    check(s.CollectionAdd(CONF % ("tmp", "1.0"), 0)[0] == 1, "added again")
    print("node session ok")


def restart(addr):
    s = xc.ServerProxy("http://%s" % addr)
    check(sorted(s.CollectionGetList()) == ["tmp", "web"], "collections persisted")
    check(s.CollectionGetStatus("web") == "suspended", "state persisted")
    check("720" in s.CollectionGetConfigurationXML("web"), "configuration persisted")
    cur = s.CollectionGetStatistics2("web")[1]["cur"]
    check(cur["CrawlMode"] == "Refreshing(limit=user)", "refresh-only persisted")
    check(s.GetLogLevel() == 0x34, "log level persisted")
    st = marshal.loads(s.CollectionGetStatistics("web").data)
    check(b"web" in st, "statistics persisted")
    print("restart ok")


def multinode(addr):
    s = xc.ServerProxy("http://%s" % addr)
    check(s.IsDistributed() == 1, "IsDistributed 1")
    def ports_or_none():
        try:
            return s.GetNodeSchedulerXmlRpcPorts()
        except xc.Fault:
            return None
    ports = wait(ports_or_none, "a registered node")
    check(len(ports) == 1 and ports[0][0] == "127.0.0.1", "ports %r" % (ports,))
    n = xc.ServerProxy("http://127.0.0.1:%d" % ports[0][1])
    check(n.IsMultiNodeScheduler() == 0 and n.IsDistributed() == 1, "node in a multinode setup")
    common(s, "multinode")
    # SetLogLevel was forwarded to the node before the answer (2.2.8.6).
    check(n.GetLogLevel() == 0x34, "log level forwarded: %r" % n.GetLogLevel())
    # The collection reached the node (CMD_ADM_CONF_ADD).
    wait(lambda: "web" in n.CollectionGetList(), "web on the node")
    # The Force rule on a node of a multinode setup (2.2.9.3, 2.2.9.4).
    fault(n.CollectionAdd, CONF % ("local", "1.0"), 0, contains="Force=1")
    check(n.CollectionAdd(CONF % ("local", "1.0"), 1)[0] == 1, "forced add on a node")
    fault(n.CollectionDelete, "local", 0, contains="Force=1")
    check(n.CollectionDelete("local", 1)[0] == 1, "forced delete on a node")
    # Routing from the routing DB.
    s.AddURIs("web", 0, ["http://127.0.0.1:9/x"])
    r = wait(lambda: (lambda r: r if r[0] == 1 else None)(
        s.CollectionGetSiteRoutingAddress("web", "127.0.0.1:9")), "a route")
    check(r[1] == ports[0], "routed to the node %r" % (r,))
    # Delete: zombie until the node answered, then gone; the name can be added again.
    r = s.CollectionDelete("web", 0)
    check(r[0] == 1, "delete %r" % (r,))
    wait(lambda: "web" not in s.CollectionGetList(), "removal to complete")
    wait(lambda: "web" not in n.CollectionGetList(), "removal on the node")
    check(s.CollectionAdd(CONF % ("web", "3.0"), 0)[1] == "Collection web added", "re-add")
    wait(lambda: "web" in n.CollectionGetList(), "re-added on the node")
    print("multinode session ok")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "node":
        node(sys.argv[2], sys.argv[3])
    elif mode == "restart":
        restart(sys.argv[2])
    else:
        multinode(sys.argv[2])
