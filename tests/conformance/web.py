"""A small web for the conformance scenarios: HTTP servers on loopback addresses that record
every request (address, port, path, start, end, and which process made it), and serve pages
whose links go on without end (/N links to /2N+1 and /2N+2), or leaf pages with `leaf=True`,
or with `sized=True` a page of exactly N bytes at /N (`bytes_in` and `bytes_out` count every
byte of the requests read and the responses written), or with `pages=P` a finite site whose
links stop below /P. `missing` paths answer 404.
"""
import http.server
import os
import socket
import threading
import time


def socket_owner(local, remote, pids):
    """The pid among `pids` that holds the TCP connection from `local` to `remote` (each
    (ip, port)), found through /proc; None when it cannot be told."""
    def hexaddr(a):
        ip = socket.inet_aton(a[0])
        return "%08X:%04X" % (int.from_bytes(ip, "little"), a[1])
    want = (hexaddr(local), hexaddr(remote))
    inode = None
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                p = line.split()
                if (p[1], p[2]) == want:
                    inode = p[9]
                    break
    except OSError:
        return None
    if inode is None:
        return None
    target = "socket:[%s]" % inode
    for pid in pids:
        d = "/proc/%d/fd" % pid
        try:
            for fd in os.listdir(d):
                try:
                    if os.readlink(os.path.join(d, fd)) == target:
                        return pid
                except OSError:
                    pass
        except OSError:
            pass
    return None


class Counting:
    """A request stream that counts what is read from it."""

    def __init__(self, f):
        self.f = f
        self.n = 0

    def readline(self, *a):
        line = self.f.readline(*a)
        self.n += len(line)
        return line

    def read(self, *a):
        data = self.f.read(*a)
        self.n += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self.f, name)


class Web:
    def __init__(self, addrs, delay=0.0, leaf=False, sized=False, pages=None, missing=()):
        self.log = []  # (ip, port, path, start, end, pid, status, body bytes)
        self.bytes_in = 0
        self.bytes_out = 0
        self.lock = threading.Lock()
        self.pids = []
        self.servers = []
        web = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                self.rfile = Counting(self.rfile)
                # The process at the other end of this connection, looked up on its first
                # request. Kept per connection, not per client address: the kernel hands the
                # same local port to connections to different servers, so a port another
                # process used a moment ago says nothing about who holds it now.
                self.owner = None

            def sized(self):
                """/N: N bytes of text/html, written as one block (head and body) and counted
                with the request that asked for it."""
                try:
                    n = int(self.path.strip("/"))
                except ValueError:
                    n = 0
                body = b"x" * n
                status = "200 OK" if n else "404 Not Found"
                head = ("HTTP/1.1 %s\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n"
                        % (status, len(body))).encode()
                with web.lock:
                    web.bytes_in += self.rfile.n
                    web.bytes_out += len(head) + len(body)
                self.rfile.n = 0
                self.wfile.write(head + body)
                self.wfile.flush()
                return (200 if n else 404), len(body)

            def do_GET(self):
                t0 = time.time()
                ip, port = self.server.server_address[:2]
                client = self.client_address[:2]
                if self.owner is None and web.pids:
                    self.owner = socket_owner(client, (ip, port), web.pids)
                pid = self.owner
                if delay:
                    time.sleep(delay)
                if sized:
                    status, size = self.sized()
                    with web.lock:
                        web.log.append((ip, port, self.path, t0, time.time(), pid, status, size))
                    return
                if self.path == "/robots.txt" or self.path in missing:
                    body, status = b"", 404
                else:
                    status = 200
                    try:
                        n = int(self.path.strip("/").split("?")[0] or "0")
                    except ValueError:
                        n = 0
                    kids = [] if leaf else [2 * n + 1, 2 * n + 2]
                    if pages is not None:
                        kids = [k for k in kids if k < pages]
                    links = " ".join('<a href="/%d">l</a>' % k for k in kids)
                    body = ("<html><body>page %d %s</body></html>" % (n, links)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with web.lock:
                    web.log.append((ip, port, self.path, t0, time.time(), pid, status,
                                    len(body)))

        for a in addrs:
            s = http.server.ThreadingHTTPServer((a, 0), Handler)
            s.daemon_threads = True
            threading.Thread(target=s.serve_forever, daemon=True).start()
            self.servers.append(s)

    def sites(self):
        """The crawl sites, "ip:port"."""
        return ["%s:%d" % s.server_address[:2] for s in self.servers]

    def requests(self):
        with self.lock:
            return list(self.log)

    def overlaps(self):
        """Pairs of requests to one IP address from two different processes at once."""
        by_ip = {}
        for r in self.requests():
            if r[5] is not None and r[2] != "/robots.txt":
                by_ip.setdefault(r[0], []).append(r)
        bad = []
        for ip, rs in by_ip.items():
            rs.sort(key=lambda r: r[3])
            open_ = []  # requests still open at the current start
            for r in rs:
                open_ = [o for o in open_ if o[4] > r[3]]
                bad.extend((o, r) for o in open_ if o[5] != r[5])
                open_.append(r)
        return bad
