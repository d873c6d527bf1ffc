"""Calls a distributor's XML-RPC search with Python's unmodified xmlrpc.client.ServerProxy.

Usage: search_client.py URL COLLECTION QUERY LIMIT
Prints the result as JSON, or {"fault": faultCode, "what": faultString}.
"""
import json
import sys
import xmlrpc.client as xc

url, collection, query, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
proxy = xc.ServerProxy(url)
try:
    print(json.dumps(proxy.search(collection, query, limit)))
except xc.Fault as f:
    print(json.dumps({"fault": f.faultCode, "what": f.faultString}))
