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


SCENARIOS = {
    "mn_sends_spec_conf": mn_sends_spec_conf,
    "node_reads_spec_conf": node_reads_spec_conf,
}

if __name__ == "__main__":
    start(SCENARIOS)
