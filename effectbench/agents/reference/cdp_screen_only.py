#!/usr/bin/env python3
"""A reference browser agent: screen_only over the Chrome DevTools Protocol.

It runs outside the harness (the agent protocol, docs/agent-protocol.md) and drives
the episode's own browser through the CDP endpoint the ``episode`` message carries
(``browser.cdp_url``): it opens the product's form, picks each select's option, types
each text field, clicks Save with the mouse and trusts the banner the next page
shows, exactly as ``browser_screen_only`` does in process. Standard library only (a
minimal WebSocket client is below), so it runs under the system Python inside the
sandbox; a real agent would use Playwright's ``connect_over_cdp`` or Puppeteer.
One thread per episode; one process serves many episodes at once.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import sys
import threading
import urllib.parse
from typing import Any

NO_BROWSER = "no browser: the harness sent no CDP endpoint for this episode"
NO_SCRIPT = "no scripted action: the task offers no solution"
TIMEOUT_S = 20.0
_out = threading.Lock()

# What the page tells: each named form field's tag, the Save button's centre, the banner.
FIELDS_JS = (
    "JSON.stringify(Object.fromEntries(Array.from(document.querySelectorAll('form [name]'), e "
    "=> [e.name, e.tagName.toLowerCase()])))"
)
BUTTON_JS = (
    "(() => { const r = document.querySelector('form "
    "button[type=submit]').getBoundingClientRect(); return JSON.stringify([r.x + r.width / 2, "
    "r.y + r.height / 2]); })()"
)
BANNER_JS = (
    "(() => { const b = document.getElementById('banner'); return JSON.stringify(b ? "
    "[b.className, b.textContent.trim()] : null); })()"
)


def send(message: dict[str, Any]) -> None:
    line = json.dumps(message, separators=(",", ":")) + "\n"
    with _out:
        sys.stdout.write(line)
        sys.stdout.flush()


# ----------------------------------------------------------------------- a WebSocket client


class WebSocket:
    """RFC 6455, client side, text frames only: enough for CDP."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port or 80), TIMEOUT_S)
        key = base64.b64encode(os.urandom(16)).decode()
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the CDP endpoint closed the connection")
            head += chunk
        status, _, self.buf = head.partition(b"\r\n\r\n")
        if b" 101 " not in status.split(b"\r\n")[0]:
            raise ConnectionError(f"the CDP endpoint refused: {status.splitlines()[0]!r}")

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the CDP endpoint closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x81]) + (
            bytes([0x80 | n]) if n < 126
            else bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536
            else bytes([0x80 | 127]) + struct.pack(">Q", n)
        )  # fmt: skip
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            data = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 8:
                raise ConnectionError("the CDP endpoint closed the connection")
            if opcode in (0, 1, 2):
                message += data
                if b0 & 0x80:
                    return message.decode()

    def close(self) -> None:
        self.sock.close()


class Cdp:
    """Synchronous CDP over one WebSocket: commands wait for their reply; events queue."""

    def __init__(self, url: str) -> None:
        self.ws = WebSocket(url)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> Any:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait(self, method: str, session: str) -> dict[str, Any]:
        while True:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.recv()))

    def value(self, expression: str, session: str) -> Any:
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session
        )
        return json.loads(result["result"]["value"])


# ----------------------------------------------------------------------- the agent


def open_page(cdp: Cdp) -> str:
    """Attach to the episode's page (the endpoint lists only this episode's)."""
    pages = [t for t in cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
    session = cdp.call(
        "Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True}
    )["sessionId"]
    cdp.call("Page.enable", session=session)
    return str(session)


def load(cdp: Cdp, session: str, start: Any) -> None:
    """Run ``start`` (a navigation or a click) and wait for the next page's load."""
    cdp.events = [e for e in cdp.events if e.get("method") != "Page.loadEventFired"]
    start()
    cdp.wait("Page.loadEventFired", session)


def fill(cdp: Cdp, session: str, values: dict[str, Any]) -> None:
    tags = cdp.value(FIELDS_JS, session)
    for name, value in values.items():
        if name not in tags:
            continue
        text = "" if value is None else str(value)
        field = f"document.querySelector({json.dumps(f'form [name={name!r}]')})"
        if tags[name] == "select":
            cdp.value(
                f"JSON.stringify(({field}.value = {json.dumps(text)}, {field}.dispatchEvent(new "
                f"Event('change', {{bubbles: true}}))))",
                session,
            )
        else:
            cdp.value(f"JSON.stringify(({field}.focus(), {field}.select(), 0))", session)
            if text:
                cdp.call("Input.insertText", {"text": text}, session)
            else:
                cdp.call(
                    "Input.dispatchKeyEvent",
                    {
                        "type": "keyDown",
                        "key": "Delete",
                        "code": "Delete",
                        "windowsVirtualKeyCode": 46,
                    },
                    session,
                )


def click(cdp: Cdp, session: str, x: float, y: float) -> None:
    for kind in ("mousePressed", "mouseReleased"):
        cdp.call(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            session,
        )


def episode(msg: dict[str, Any]) -> None:
    ep, task = msg["episode_id"], msg["task"]
    channels = msg.get("channels") or {}
    base = channels.get("web_url") or channels.get("base_url")
    url = (msg.get("browser") or {}).get("cdp_url")
    if not url:
        return report(ep, False, NO_BROWSER)
    if not task.get("solution") or not base:
        return report(ep, False, NO_SCRIPT)
    cdp = Cdp(url)
    try:
        session = open_page(cdp)
        try:
            load(cdp, session, lambda: cdp.call("Page.navigate", {"url": base}, session))
            fill(cdp, session, task["solution"])
            x, y = cdp.value(BUTTON_JS, session)
            load(cdp, session, lambda: click(cdp, session, x, y))
            banner = cdp.value(BANNER_JS, session)
        except RuntimeError:  # a page that failed to load is an error page: not saved
            banner = None
    finally:
        cdp.ws.close()
    saved = banner is not None and banner[0].split() == ["saved"]
    message = "" if banner is None else banner[1]
    send({"type": "action", "episode_id": ep, "kind": "submit_form",
          "detail": {"screen_says_saved": saved, "channel": "cdp"}})  # fmt: skip
    if saved:
        return report(ep, True, f"screen says saved: {message}")
    return report(ep, False, f"screen did not confirm the save: {message}")


def report(episode_id: str, success: bool, message: str) -> None:
    send({"type": "report", "episode_id": episode_id, "reported_success": success,
          "halted": not success, "message": message})  # fmt: skip


def guarded(msg: dict[str, Any]) -> None:
    try:
        episode(msg)
    except Exception as exc:  # noqa: BLE001 - told to the harness, which fails the episode
        send({"type": "error", "episode_id": msg.get("episode_id"),
              "message": f"{type(exc).__name__}: {exc}"})  # fmt: skip


def main() -> None:
    threads: list[threading.Thread] = []
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if msg.get("type") == "episode":
            thread = threading.Thread(target=guarded, args=(msg,), daemon=True)
            thread.start()
            threads = [t for t in threads if t.is_alive()] + [thread]
    for thread in threads:  # end of input: the run is over; finish what is running
        thread.join()


if __name__ == "__main__":
    main()
