"""The admin port's tokens as a client sees them: Python's unmodified xmlrpc.client, with HTTP
basic credentials in the URL (the token as the password), and raw HTTP with a Bearer header.

Usage: admin_auth.py HOST:PORT FULL_TOKEN READONLY_TOKEN
Prints "ok" when every check held; raises (non-zero exit) on the first that did not.
"""

import http.client
import sys
import xmlrpc.client

addr, full, ro = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = addr.rsplit(":", 1)


def proxy(password=None):
    creds = "" if password is None else "admin:%s@" % password
    return xmlrpc.client.ServerProxy("http://%s%s/RPC2" % (creds, addr))


def refused(call, status):
    try:
        call()
    except xmlrpc.client.ProtocolError as e:
        assert e.errcode == status, (e.errcode, e.errmsg)
        return e.headers
    raise AssertionError("not refused with %d" % status)


# No token, or a wrong one: 401 with a challenge (xmlrpc.client keeps one header of a name;
# both challenges are checked over raw HTTP below).
headers = refused(lambda: proxy().CollectionGetList(), 401)
assert "realm=\"crawlfleet admin\"" in headers["WWW-Authenticate"], headers
refused(lambda: proxy("not-the-token-at-all").CollectionGetList(), 401)
refused(lambda: proxy().system.listMethods(), 401)

# The full token: everything, state-changing calls included.
p = proxy(full)
assert isinstance(p.CollectionGetList(), list)
assert p.SetLogLevel(0x10 | 0x20 | 0x40) == 1
assert "CollectionSuspend" in p.system.listMethods()

# The read-only token: the methods that read, not those that change.
r = proxy(ro)
assert isinstance(r.CollectionGetList(), list)
assert r.GetLogLevel() == 0x10 | 0x20 | 0x40
assert r.IsDistributed() in (0, 1)
refused(lambda: r.SetLogLevel(0x04), 403)
refused(lambda: r.CollectionSuspend("nothing"), 403)
assert p.GetLogLevel() == 0x10 | 0x20 | 0x40, "the refused call changed nothing"


def raw(method, path, headers, body=b"", challenges=None):
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    c.request(method, path, body=body, headers=headers)
    a = c.getresponse()
    data = a.read()
    if challenges is not None:
        challenges.extend(a.headers.get_all("WWW-Authenticate") or [])
    c.close()
    return a.status, data


# The challenges of a 401: Basic (which a browser asks the user for) and Bearer.
challenges = []
status, _ = raw("POST", "/RPC2", {"Content-Type": "text/xml"}, b"", challenges)
assert status == 401, status
assert any(c.startswith('Basic realm="crawlfleet admin"') for c in challenges), challenges
assert any(c.startswith('Bearer realm="crawlfleet admin"') for c in challenges), challenges


call = xmlrpc.client.dumps((), "CollectionGetList").encode()
xml = {"Content-Type": "text/xml"}
status, body = raw("POST", "/RPC2", dict(xml, Authorization="Bearer " + full), call)
assert status == 200 and b"<methodResponse>" in body, (status, body)
status, _ = raw("POST", "/RPC2", dict(xml, Authorization="Bearer " + ro), call)
assert status == 200, status
status, _ = raw("POST", "/RPC2", dict(xml, Authorization="Bearer " + full + "x"), call)
assert status == 401, status
status, _ = raw("POST", "/RPC2", dict(xml, Authorization="Digest " + full), call)
assert status == 401, status
# Every path goes through the check, not only /RPC2: without a token nothing is said about it.
status, _ = raw("GET", "/metrics", {})
assert status == 401, status
status, _ = raw("GET", "/", {})
assert status == 401, status
# A read-only token may look (GET) but not post elsewhere.
status, _ = raw("GET", "/RPC2", {"Authorization": "Bearer " + ro})
assert status == 405, status
status, _ = raw("POST", "/elsewhere", {"Authorization": "Bearer " + ro}, b"x")
assert status == 403, status

if len(sys.argv) > 4 and sys.argv[4] == "indexnow":
    # IndexNow carries its own proof (the key file on the host): no admin token needed, the
    # submission is read (400: not JSON) instead of refused.
    status, _ = raw("POST", "/indexnow", {"Content-Type": "application/json"}, b"{")
    assert status == 400, status

print("ok")
