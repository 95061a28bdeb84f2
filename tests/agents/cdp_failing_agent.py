"""A protocol agent that takes its episode's browser and then fails: it connects to the
CDP endpoint and opens a page, then hangs past its deadline (the ``ok`` task) or gives up
(any other), so the harness must close a context an agent still holds."""

from __future__ import annotations

import json
import sys
import threading
import time

from effectbench.agents.reference.cdp_screen_only import Cdp


def episode(msg: dict) -> None:
    cdp = Cdp(msg["browser"]["cdp_url"])
    cdp.call("Target.createTarget", {"url": "about:blank"})
    if msg["episode_id"].endswith("::ok::t0"):
        time.sleep(3600)
    line = {"type": "error", "episode_id": msg["episode_id"], "message": "giving up"}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
    time.sleep(3600)  # still holding the connection


for raw in sys.stdin:
    message = json.loads(raw)
    if message.get("type") == "episode":
        threading.Thread(target=episode, args=(message,), daemon=True).start()
