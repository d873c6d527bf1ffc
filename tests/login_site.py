#!/usr/bin/env python3
"""A web site behind a form login, for tests/login.rs (docs/collection-config.md "Login").

    login_site.py ADDRESS LOG PAGES EXPIRE

Serves on ADDRESS (port 0: a free one, printed on the first line of stdout) until killed:

- /welcome sets the cookie `pre` (a Login's `preload`);
- /login-form holds the login form: a hidden `csrf` field whose value changes with every
  form served, `user`, `pass` (a Login's `html_form`, with `autofill` for the token);
- POST /login with user=alice, pass=secret, the csrf of a form served, and the cookie `pre`
  answers 302 to / with a new `session` cookie; anything else 403;
- / and /p/1 .. /p/PAGES-1 are the members' pages, each linking to two more: with a live
  session 200, otherwise 302 to /login-form. A session dies after EXPIRE pages.
- /robots.txt allows everything.

Every request is logged to LOG as a JSON line: method, path, status, session (the cookie's
value or null), live (whether that session was live).
"""

import http.server
import json
import secrets
import sys
import threading
import urllib.parse

ADDRESS, LOG, PAGES, EXPIRE = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lock = threading.Lock()
sessions = {}  # session id -> pages served through it
tokens = set()
log = open(LOG, "a", buffering=1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def cookies(self):
        out = {}
        for part in (self.headers.get("Cookie") or "").split(";"):
            if "=" in part:
                k, v = part.strip().split("=", 1)
                out[k] = v
        return out

    def answer(self, status, body=b"", headers=(), session=None, live=False):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        if body:
            self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body)
        line = {"method": self.command, "path": self.path, "status": status,
                "session": session, "live": live}
        log.write(json.dumps(line) + "\n")

    def do_GET(self):
        c = self.cookies()
        path = urllib.parse.urlsplit(self.path).path
        if path == "/robots.txt":
            return self.answer(200, b"User-agent: *\nAllow: /\n")
        if path == "/welcome":
            return self.answer(200, b"<p>welcome</p>", [("Set-Cookie", "pre=1; Path=/")])
        if path == "/login-form":
            token = secrets.token_hex(8)
            with lock:
                tokens.add(token)
            form = ('<html><body><form id="search" action="/search"><input name="q"></form>'
                    '<form method="post" action="/login">'
                    f'<input type="hidden" name="csrf" value="{token}">'
                    '<input name="user"><input type="password" name="pass">'
                    '<input type="submit" value="Log in"></form></body></html>')
            return self.answer(200, form.encode())
        if path == "/" or path.startswith("/p/"):
            n = 0 if path == "/" else int(path[3:])
            sid = c.get("session")
            with lock:
                live = sid in sessions and sessions[sid] < EXPIRE
                if live:
                    sessions[sid] += 1
            if not live:
                return self.answer(302, headers=[("Location", "/login-form")], session=sid)
            links = "".join(f'<a href="/p/{k}">page {k}</a>'
                            for k in (2 * n + 1, 2 * n + 2) if k < PAGES)
            body = f"<html><body><h1>members page {n}</h1>{links}</body></html>".encode()
            return self.answer(200, body, session=sid, live=True)
        return self.answer(404)

    def do_POST(self):
        c = self.cookies()
        n = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(n).decode())
        one = lambda k: (form.get(k) or [""])[0]
        with lock:
            ok = (self.path == "/login" and one("user") == "alice" and one("pass") == "secret"
                  and one("csrf") in tokens and c.get("pre") == "1")
            tokens.discard(one("csrf"))
            sid = secrets.token_hex(8) if ok else None
            if ok:
                sessions[sid] = 0
        if not ok:
            return self.answer(403, b"no")
        return self.answer(302, headers=[("Location", "/"),
                                         ("Set-Cookie", f"session={sid}; Path=/; HttpOnly")],
                           session=sid)


host, port = ADDRESS.rsplit(":", 1)
server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
