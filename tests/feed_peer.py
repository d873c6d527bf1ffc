# The python3 side of tests/feeding.rs: a feeding-session client written from
# docs/distributor.md "Feeding sessions" and docs/nameserver.md with nothing but CPython's
# own marshal module (version 2, as for the FSCMT peers).
#
#   python3 -c <this> HOST PORT   reads one JSON line per step on stdin and prints one JSON line
#                                 per step on stdout:
#     {"object": O, "method": M, "id": N, "args": {...}}  sends the request, prints the reply
#     {"connect": [HOST, PORT]}                          connects there instead, prints {}
#                                                        ({"closed": true} when refused)
#     {"raw_hex": H}                                     sends the bytes, prints the reply
#     {"eof": true}                                      prints {"closed": true} when the
#                                                        server has closed the connection
#   In args, {"$hex": H} is the byte string H and {"$b": S} the UTF-8 bytes of S; other
#   strings go as marshal's unicode strings. A reply prints as its dict, byte strings as text;
#   a connection closed instead of an answer prints {"closed": true}.
import json
import marshal
import socket
import struct
import sys


def text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [text(x) for x in v]
    if isinstance(v, dict):
        return {text(k): text(x) for k, x in v.items()}
    return v


def wire(v):
    if isinstance(v, dict):
        if "$hex" in v:
            return bytes.fromhex(v["$hex"])
        if "$b" in v:
            return v["$b"].encode("utf-8")
        return {k: wire(x) for k, x in v.items()}
    if isinstance(v, list):
        return [wire(x) for x in v]
    return v


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except (ConnectionResetError, socket.timeout):
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def reply(s):
    header = recv_exact(s, 4)
    if header is None:
        return {"closed": True}
    (n,) = struct.unpack(">I", header)
    body = recv_exact(s, n)
    if body is None:
        return {"closed": True, "truncated": True}
    message, _ = marshal.loads(body)
    return text(message)


def connect(host, port):
    try:
        return socket.create_connection((host, port), timeout=20)
    except OSError:
        return None


def main():
    s = connect(sys.argv[1], int(sys.argv[2]))
    for line in sys.stdin:
        step = json.loads(line)
        if "connect" in step:
            if s is not None:
                s.close()
            s = connect(step["connect"][0], step["connect"][1])
            out = {} if s is not None else {"closed": True}
        elif s is None:
            out = {"closed": True}
        elif step.get("eof"):
            out = {"closed": recv_exact(s, 1) is None}
        else:
            if "raw_hex" in step:
                data = bytes.fromhex(step["raw_hex"])
            else:
                request = {
                    "object": step["object"],
                    "method": step["method"],
                    "id": step["id"],
                    "args": wire(step.get("args", {})),
                }
                body = marshal.dumps((request, 0), 2)
                data = struct.pack(">I", len(body)) + body
            try:
                s.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass
            out = reply(s)
        print(json.dumps(out), flush=True)


main()
