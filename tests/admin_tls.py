"""An administrative port over TLS as a client sees it: Python's ssl trusting only the port's
own (self-signed) certificate, xmlrpc.client over https with the token as the basic password.

Usage: admin_tls.py HOST:PORT CERT.pem TOKEN
Prints "ok" when every check held; raises (non-zero exit) on the first that did not.
"""

import http.client
import ssl
import sys
import xmlrpc.client

addr, cert, token = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = addr.rsplit(":", 1)
ctx = ssl.create_default_context(cafile=cert)

p = xmlrpc.client.ServerProxy("https://admin:%s@%s/RPC2" % (token, addr), context=ctx)
assert isinstance(p.CollectionGetList(), list)
assert "CollectionAdd" in p.system.listMethods()

# The token is checked over TLS as over plain HTTP.
try:
    xmlrpc.client.ServerProxy("https://%s/RPC2" % addr, context=ctx).CollectionGetList()
    raise AssertionError("no 401 without the token")
except xmlrpc.client.ProtocolError as e:
    assert e.errcode == 401, e.errcode

# A client that does not trust the certificate (the system's roots only) is refused by its own
# check.
try:
    strict = ssl.create_default_context()
    xmlrpc.client.ServerProxy("https://admin:%s@%s/RPC2" % (token, addr), context=strict).CollectionGetList()
    raise AssertionError("an untrusted certificate was accepted")
except ssl.SSLCertVerificationError:
    pass

# Plain HTTP on the TLS port gets no answer.
c = http.client.HTTPConnection(host, int(port), timeout=30)
try:
    c.request("POST", "/RPC2", body=xmlrpc.client.dumps((), "CollectionGetList"))
    c.getresponse()
    raise AssertionError("plain HTTP was answered")
except (http.client.HTTPException, ConnectionError, OSError):
    pass

print("ok")
