"""MS-FSCADM conformance scenarios, the client side of tests/conformance_fscadm.rs: Python's
unmodified xmlrpc.client against a real role, each scenario naming the section it checks.

Usage: conformance_fscadm.py SCENARIO ADDR ARGS...
"""
import os
import sys
import time
import xmlrpc.client as xc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fscmt_peer import check, start  # noqa: E402


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


SCENARIOS = {
    "set_log_level": set_log_level,
    "malformed_arguments": malformed_arguments,
}

if __name__ == "__main__":
    start(SCENARIOS)
