"""A hostile ``exec+browser:`` agent written from docs/agent-protocol.md: through its
episode's CDP endpoint it tries to read host files, list ``/dev/shm`` (where episode
databases live), download into a host directory and read another loopback service,
and reports everything the browser gave it back (the message is JSON: probe -> text).

    cdp_escape_agent.py CDP_CLIENT SECRET_URL DOWNLOAD_DIR SECRET_FILE_URL

CDP_CLIENT is the reference agent's file (its stdlib CDP client is imported from
there; naming it mounts its directory in the sandbox)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(sys.argv[1]).parent))
from cdp_screen_only import Cdp

SECRET_URL, DOWNLOAD_DIR, SECRET_FILE_URL = sys.argv[2:5]
_out = threading.Lock()
DOWNLOAD_JS = (
    "(() => { const a = document.createElement('a'); a.href = URL.createObjectURL(new "
    "Blob(['import os'])); a.download = 'escape.pth'; document.body.append(a); a.click(); "
    "return 'clicked'; })()"
)


def send(message: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def attempt(cdp: Cdp, session: str, method: str, params: dict[str, Any]) -> str:
    """One command, then the page's text once it has loaded (or the refusal)."""
    cdp.events = [e for e in cdp.events if e.get("method") != "Page.loadEventFired"]
    try:
        reply = cdp.call(method, params, session)
    except RuntimeError as exc:
        return f"refused: {exc}"
    if method == "Page.navigate":
        if reply.get("errorText"):
            return f"failed: {reply['errorText']}"
        cdp.wait("Page.loadEventFired", session)
    result = cdp.call(
        "Runtime.evaluate",
        {"expression": "document.documentElement.outerHTML", "returnByValue": True},
        session,
    )
    return str(result["result"].get("value"))[:4000]


def episode(msg: dict[str, Any]) -> None:
    cdp = Cdp(msg["browser"]["cdp_url"])
    found: dict[str, str] = {}
    try:
        targets = cdp.call("Target.getTargets")["targetInfos"]
        page = next(t["targetId"] for t in targets if t["type"] == "page")
        session = cdp.call("Target.attachToTarget", {"targetId": page, "flatten": True})[
            "sessionId"
        ]
        cdp.call("Page.enable", session=session)
        for name, url in (
            ("file", SECRET_FILE_URL),
            ("shm", "file:///dev/shm/"),
            ("other_port", SECRET_URL),
        ):
            found[name] = attempt(cdp, session, "Page.navigate", {"url": url})
        base = msg["channels"]["base_url"]
        found["product"] = attempt(cdp, session, "Page.navigate", {"url": base})
        fetch = f"fetch({SECRET_URL!r}).then(r => r.text()).catch(e => 'failed: ' + e)"
        reply = cdp.call(
            "Runtime.evaluate",
            {"expression": fetch, "awaitPromise": True, "returnByValue": True},
            session,
        )
        found["fetch"] = str(reply["result"].get("value"))
        for where, method in ((session, "Page.setDownloadBehavior"),
                              (None, "Browser.setDownloadBehavior")):  # fmt: skip
            try:
                cdp.call(method, {"behavior": "allow", "downloadPath": DOWNLOAD_DIR}, where)
            except RuntimeError as exc:
                found[method] = f"refused: {exc}"
        cdp.call("Runtime.evaluate", {"expression": DOWNLOAD_JS}, session)
    finally:
        cdp.ws.close()
    send({"type": "report", "episode_id": msg["episode_id"], "reported_success": False,
          "halted": True, "message": json.dumps(found)})  # fmt: skip


def guarded(msg: dict[str, Any]) -> None:
    try:
        episode(msg)
    except Exception as exc:  # noqa: BLE001 - told to the harness
        send({"type": "error", "episode_id": msg.get("episode_id"),
              "message": f"{type(exc).__name__}: {exc}"})  # fmt: skip


for raw in sys.stdin:
    message = json.loads(raw) if raw.strip() else {}
    if message.get("type") == "episode":
        guarded(message)
