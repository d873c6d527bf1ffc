"""Drives the dashboard in headless Chromium through chromedriver (W3C WebDriver over HTTP,
standard library only): waits until the page shows pages crawled > 0 and a master content
distributor, clicks Suspend for a
collection, confirms, waits for the answer and for the table to show the collection
suspended, saves a screenshot. Prints one JSON line: {"pages": N, "result": "...",
"state": "...", "distributors": "the distributor table's text"}.

usage: drive.py DASHBOARD_URL COLLECTION SCREENSHOT.png [CHROMIUM [CHROMEDRIVER]]
"""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1400,1100",
]
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Driver:
    def __init__(self, base):
        self.base = base
        self.session = None

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            value = json.loads(e.read()).get("value", {})
            raise WebDriverError(value.get("error", str(e.code)), value.get("message", ""))

    def s(self, method, path, body=None):
        return self.request(method, "/session/" + self.session + path, body)

    def find(self, css):
        return self.s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def text(self, css):
        return self.s("GET", "/element/" + self.find(css) + "/text")

    def click(self, css):
        self.s("POST", "/element/" + self.find(css) + "/click", {})


class WebDriverError(Exception):
    def __init__(self, error, message):
        super().__init__(error + ": " + message)
        self.error = error


def until(what, fn, timeout=120):
    """Polls fn until it returns something true (WebDriver and connection errors count as not
    yet)."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            v = fn()
            if v:
                return v
        except (WebDriverError, OSError) as e:
            last = e
        time.sleep(0.25)
    sys.exit("timed out waiting for %s (last error: %s)" % (what, last))


def main():
    url, collection, shot = sys.argv[1:4]
    chromium = sys.argv[4] if len(sys.argv) > 4 else shutil.which("chromium")
    chromedriver = sys.argv[5] if len(sys.argv) > 5 else shutil.which("chromedriver")
    port = free_port()
    profile = tempfile.mkdtemp(prefix="crawlfleet-chromium-")
    cd = subprocess.Popen([chromedriver, "--port=%d" % port], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    d = Driver("http://127.0.0.1:%d" % port)
    try:
        until("chromedriver", lambda: d.request("GET", "/status").get("ready"), 30)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium,
                                   "args": FLAGS + ["--user-data-dir=" + profile]},
        }}}
        d.session = d.request("POST", "/session", caps)["sessionId"]
        d.s("POST", "/url", {"url": url})
        pages = until("pages crawled > 0",
                      lambda: int(d.text("#pages-total") or "0") > 0 and int(d.text("#pages-total")))
        # The content distributors' panel (read from their /metrics): one is the master.
        until("the distributor panel to show a master",
              lambda: "master" in d.text("#distributors tbody"))
        row = 'tr[data-collection="%s"]' % collection
        button = row + ' button[data-action="suspend"]'
        # The table is redrawn every poll: find and click again when the button was replaced.
        until("the Suspend button", lambda: d.click(button) is None)
        until("the confirmation", lambda: d.s("GET", "/element/%s/displayed" % d.find("#confirm-yes")))
        d.click("#confirm-yes")
        result = until("the answer", lambda: d.s("GET", "/element/%s/attribute/class" % d.find("#result"))
                       in ("ok", "fault") and d.text("#result"))
        fault = d.s("GET", "/element/%s/attribute/class" % d.find("#result")) == "fault"
        state = until("the table to show it suspended",
                      lambda: d.text(row + " td.state") == "Suspended" and "Suspended", 60)
        png = d.s("GET", "/screenshot")
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png))
        print(json.dumps({"pages": pages, "result": result, "fault": fault, "state": state,
                          "distributors": d.text("#distributors tbody")}))
    finally:
        if d.session:
            try:
                d.request("DELETE", "/session/" + d.session)
            except Exception:
                pass
        cd.kill()
        cd.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
