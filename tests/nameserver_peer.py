# The python3 side of tests/nameserver.rs: a name server peer written from docs/nameserver.md
# with nothing but CPython's own marshal module (version 2, as for the FSCMT peers).
#
#   python3 -c <this> HOST PORT   reads one JSON line per step on stdin and prints one JSON line
#                                 per step on stdout:
#     {"method": M, "id": N, "args": {...}, "object": O}   sends the request (object defaults to
#                                                          "nameserver"), prints the reply dict
#     {"raw_hex": H}                                       sends the bytes, prints the reply
#     {"eof": true}                                        prints {"closed": true} when the
#                                                          server has closed the connection
#     {"reconnect": true}                                  opens a new connection, prints {}
#   A sending step may add "half_close": true (shut the write side down after sending) and
#   "replies": N (read N replies, printed as a list; default one, printed alone).
#   A reply is printed as its dict with strings as text, plus "priority"; a connection the
#   server closed instead of answering prints {"closed": true}.
import json
import marshal
import socket
import struct
import sys


def text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, (list, tuple)):
        return [text(x) for x in v]
    if isinstance(v, dict):
        return {text(k): text(x) for k, x in v.items()}
    return v


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except ConnectionResetError:
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
    message, priority = marshal.loads(body)
    out = text(message)
    out["priority"] = priority
    return out


def connect(host, port):
    return socket.create_connection((host, port), timeout=20)


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    s = connect(host, port)
    for line in sys.stdin:
        step = json.loads(line)
        if step.get("reconnect"):
            s.close()
            s = connect(host, port)
            out = {}
        elif step.get("eof"):
            out = {"closed": recv_exact(s, 1) is None}
        else:
            if "raw_hex" in step:
                wire = bytes.fromhex(step["raw_hex"])
            else:
                request = {
                    "object": step.get("object", "nameserver"),
                    "method": step["method"],
                    "id": step["id"],
                    "args": step.get("args", {}),
                }
                body = marshal.dumps((request, 0), 2)
                wire = struct.pack(">I", len(body)) + body
            try:
                s.sendall(wire)
                if step.get("half_close"):
                    s.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass
            if "replies" in step:
                out = [reply(s) for _ in range(step["replies"])]
            else:
                out = reply(s)
        print(json.dumps(out), flush=True)


main()
