"""An MS-FSCMT peer written from the spec alone: CPython's marshal (version 2, byte strings as a
Python 2 peer sends them) in length-prefixed frames (2.2.1). No crawlfleet code.

Usage: fscmt_peer.py SCENARIO ARGS...   (the scenarios are in conformance_fscmt.py)
A scenario that listens prints one JSON line {"port": P} first; every scenario exits non-zero
with a message on the first failed check, and prints {"ok": ...} when all passed.
"""
import json
import marshal
import signal
import socket
import struct
import sys
import time

# 2.2.3-2.2.5: PKT_CMD values.
CMD = {
    "CMD_ADM_CONF_UPDATE": 0, "CMD_ADM_CONF_ADD": 1, "CMD_ADM_CONF_REMOVE": 2,
    "CMD_ADM_CONF_SUSPEND": 3, "CMD_ADM_CONF_RESUME": 4, "CMD_ADM_CONF_REFRESH": 5,
    "CMD_ADM_PREEMPT_SITE": 6, "CMD_UM_ADD_ROUTE": 7, "CMD_UM_ASK_ROUTE": 8,
    "CMD_UM_LAST_ROUTE": 9, "CMD_UM_KEEPALIVE": 10, "CMD_UM_KEEPALIVE_ACK": 11,
    "CMD_UM_DNS_REQUEST": 12, "CMD_UM_DNS_REPLY": 13, "CMD_UM_REPROCESS_SITE": 14,
    "CMD_UM_QUARANTINE_SITE": 15, "CMD_UM_START_CRAWL_IP": 16, "CMD_UM_STOP_CRAWL_IP": 17,
    "CMD_UM_DELETE_SITE": 18, "CMD_UM_DELETE_URIS": 19, "CMD_UM_CONF_STATE": 20,
    "CMD_UM_QUARANTINE_SITE_REQUEUE": 21, "CMD_UM_DELETE_OK": 22,
    "CMD_ADM_CONF_FEEDING_SUSPEND": 23, "CMD_UM_INIT": 24, "CMD_UM_URI": 25,
    "CMD_UM_URI_URG": 26, "CMD_UM_STAT": 27, "CMD_UM_LOG": 28,
    "PPDUP_ADD_OK": 50, "PPDUP_ERROR": 51, "PPDUP_ADD": 52, "PPDUP_REMOVE": 53,
    "PPDUP_REMOVE_OK": 54, "PPDUP_KEEPALIVE": 55, "PPDUP_KEEPALIVE_ACK": 56,
    "PPDUP_PROMOTE_REQ": 57, "PPDUP_CONF_REMOVE": 58, "PPDUP_SET_CONFIG": 59,
    "PPDUP_CONFIG_ACK": 60, "PPDUP_CONF_REMOVE2": 61,
}
NAME = {v: k for k, v in CMD.items()}


def check(cond, what):
    if not cond:
        sys.exit("check failed: " + what)


def b(v):
    """Every text as bytes, recursively: what a Python 2 peer's str is on the wire."""
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, dict):
        return {b(k): b(x) for k, x in v.items()}
    if isinstance(v, list):
        return [b(x) for x in v]
    if isinstance(v, tuple):
        return tuple(b(x) for x in v)
    return v


def t(v):
    """Every byte string as text, recursively, to compare and print."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    if isinstance(v, dict):
        return {t(k): t(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(t(x) for x in v)
    return v


class Conn:
    """One FSCMT connection (2.2.1): 4-byte big-endian length, then marshal (dict, priority)."""

    def __init__(self, sock):
        self.s = sock
        self.s.settimeout(30)
        self.buf = b""

    @staticmethod
    def connect(addr):
        host, port = addr.rsplit(":", 1)
        return Conn(socket.create_connection((host, int(port)), timeout=30))

    def send(self, name, prio=0, **keys):
        d = {b"cm": CMD[name]}
        for k, v in keys.items():
            d[k.encode()] = b(v)
        self.send_dict(d, prio)

    def send_dict(self, d, prio=0):
        body = marshal.dumps((d, prio), 2)
        self.s.sendall(struct.pack(">I", len(body)) + body)

    def recv(self, timeout=30):
        """The next message as a text dict with "cm" named, or None when the peer closed."""
        end = time.time() + timeout
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack(">I", self.buf[:4])[0]
                if len(self.buf) >= 4 + n:
                    body, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    d, prio = marshal.loads(body)
                    check(prio in (0, 1), "priority is 0 or 1 (2.2.1): %r" % (prio,))
                    m = t(d)
                    m["cm"] = NAME.get(m["cm"], m["cm"])
                    return m
            left = end - time.time()
            if left <= 0:
                raise TimeoutError("no message within %s s" % timeout)
            self.s.settimeout(left)
            try:
                chunk = self.s.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buf += chunk

    def poll(self, timeout):
        """The next message within `timeout` seconds, or None."""
        try:
            return self.recv(timeout)
        except (TimeoutError, socket.timeout):
            return None

    def wait(self, name, timeout=30, seen=None):
        """Reads until a `name` message arrives (answering keep-alives), returns it. Every
        message read on the way is appended to `seen` when given."""
        end = time.time() + timeout
        while True:
            left = end - time.time()
            check(left > 0, "no %s within %s s" % (name, timeout))
            m = self.poll(left)
            if m is None:
                continue
            if seen is not None:
                seen.append(m)
            if m["cm"] == "CMD_UM_KEEPALIVE":
                self.send("CMD_UM_KEEPALIVE_ACK")
            elif m["cm"] == "PPDUP_KEEPALIVE":
                self.send("PPDUP_KEEPALIVE_ACK")
            if m["cm"] == name:
                return m

    def close(self):
        self.s.close()


class Listener:
    def __init__(self):
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(16)
        self.s.settimeout(30)
        self.port = self.s.getsockname()[1]

    def accept(self):
        c, _ = self.s.accept()
        return Conn(c)


def announce(**kv):
    print(json.dumps(kv), flush=True)


def start(scenarios):
    signal.alarm(120)  # a scenario stops by itself
    name = sys.argv[1]
    result = scenarios[name](*sys.argv[2:])
    print(json.dumps({"ok": result if result is not None else True}), flush=True)
