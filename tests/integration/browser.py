"""browser - a page opened in Debian's headless Chromium, driven through the
DevTools protocol over a pipe (--remote-debugging-pipe: file descriptors 3
and 4, messages ended by a NUL byte), so that a test sees what a person
would: the page as drawn, its console, its errors, every request it made,
a screenshot, and what hovering does.

The browser is kept offline: every host resolves to nothing and every
request would go to a closed proxy, so a page that tried to load anything
could not; the requests it tried are still reported by the protocol.
Whatever is missing (Chromium) fails the test saying so: never skipped.
"""
import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

from hwtest import check, fail


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        fail("chromium is not installed, so the HTML report cannot be opened in a browser "
             "(scripts/ensure-deps.sh test installs Debian's chromium)")
    return path


class Browser:
    def __init__(self, width=1280, height=900):
        self.dir = tempfile.mkdtemp(prefix="hw-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds():
            # the protocol's descriptors: 3 reads commands, 4 writes answers
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        cmd = [chromium(), "--headless", "--no-sandbox", "--no-first-run", "--no-default-browser-check",
               "--remote-debugging-pipe", f"--user-data-dir={os.path.join(self.dir, 'profile')}",
               "--enable-unsafe-swiftshader", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
               "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={width},{height}", "about:blank"]
        self.log = open(os.path.join(self.dir, "chromium.log"), "w")
        self.proc = subprocess.Popen(cmd, preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _send(self, method, params, session):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.from_browser], [], [], max(0, left))
            if not ready:
                return None
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                fail("chromium closed the DevTools pipe:\n" + self.chromium_log()[-3000:])
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, timeout=60):
        """A command to the page (or the browser before a page is attached): its result."""
        want = self._send(method, params, self.session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(deadline)
            if msg is None:
                fail(f"chromium did not answer {method} within {timeout} s")
            if msg.get("id") == want:
                if "error" in msg:
                    fail(f"chromium: {method} failed: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def pump(self, seconds):
        """Take the events that arrive within `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            msg = self._read(deadline)
            if msg is None:
                return
            self.events.append(msg)

    def evaluate(self, expression, timeout=60):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      timeout=timeout)
        if "exceptionDetails" in r:
            fail(f"evaluating {expression[:200]!r} threw: {r['exceptionDetails']}")
        return r["result"].get("value")

    def open(self, url, ready="document.body && document.body.getAttribute('data-rendered') === 'yes'", timeout=60):
        """Load url and wait until `ready` holds (and the load event came)."""
        self.events = []
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.2)
            loaded = any(e.get("method") == "Page.loadEventFired" for e in self.events)
            if loaded and self.evaluate(f"!!({ready})"):
                self.pump(0.5)  # what the page does right after
                return
        fail(f"{url} was not drawn within {timeout} s\n" + "\n".join(self.messages()))

    def messages(self):
        """The console's messages, the page's uncaught exceptions and the browser's log entries."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                out.append(f"console.{p.get('type')}: {text}")
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(f"exception: {d.get('text')} {d.get('exception', {}).get('description', '')}")
            elif m == "Log.entryAdded":
                entry = p.get("entry", {})
                out.append(f"log.{entry.get('level')} ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
        return out

    def requests(self):
        """The URL of every request the page made."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path, full_page=True, height=None):
        """The page (all of it, or the viewport), or its top `height` pixels, as a PNG file."""
        params = {"format": "png"}
        if full_page or height:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update({"captureBeyondViewport": True,
                           "clip": {"x": 0, "y": 0, "width": size[0], "height": height or size[1], "scale": 1}})
        data = self.call("Page.captureScreenshot", params, timeout=120)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        check(os.path.getsize(path) > 1000, f"the screenshot {path} is empty")

    def hover(self, x, y):
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        self.pump(0.1)

    def chromium_log(self):
        self.log.flush()
        with open(os.path.join(self.dir, "chromium.log"), errors="replace") as f:
            return f.read()

    def close(self):
        try:
            self.session = None
            self._send("Browser.close", None, None)
            self.proc.wait(timeout=15)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
