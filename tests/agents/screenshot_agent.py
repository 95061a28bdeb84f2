"""An ``exec-each+browser:`` agent that asks the harness for screenshots of its page.

    screenshot_agent.py CDP_CLIENT MODE

CDP_CLIENT is the reference CDP agent's file (its stdlib CDP client and form helpers
are imported from there). MODE:

- ``evidence``: opens the form, fills it, asks for a screenshot (with the image) of the
  filled form, clicks Save at the button's coordinates (an ``action`` with x and y),
  asks for one more (without the image) and reports; the report's message is JSON: the
  episode's viewport and every answer, the image replaced by what the agent checked of
  it (its sha256 and its pixel size).
- ``many N``: asks N times in a row, each after the last answer, and reports the answers'
  ``ok``/``error`` (JSON) without the images.
- ``flood N``: asks N times without reading an answer, then waits for stdin to end.
- ``forged``: asks for a screenshot of its own page, then for one naming an episode it
  was not given.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(sys.argv[1]).parent))
from cdp_screen_only import BUTTON_JS, Cdp, click, fill, load, open_page

MODE = sys.argv[2]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer() -> dict[str, Any]:
    """The next screenshot_result on stdin, the image checked and dropped."""
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") != "screenshot_result":
            continue
        png = msg.pop("png_base64", None)
        if png is not None:
            data = base64.b64decode(png)
            msg["image_sha256"] = hashlib.sha256(data).hexdigest()
            msg["image_size"] = list(struct.unpack(">II", data[16:24]))
        return msg
    raise SystemExit("stdin ended before the screenshot_result")


def shot(ep: str, ident: int, label: str, image: bool) -> dict[str, Any]:
    send({"type": "screenshot", "episode_id": ep, "id": ident, "label": label, "image": image})
    return answer()


def report(ep: str, success: bool, message: Any) -> None:
    send({"type": "report", "episode_id": ep, "reported_success": success,
          "halted": not success, "message": json.dumps(message)})  # fmt: skip


def evidence(msg: dict[str, Any]) -> None:
    ep, browser = msg["episode_id"], msg["browser"]
    cdp = Cdp(browser["cdp_url"])
    session = open_page(cdp)
    base = msg["channels"]["base_url"]
    load(cdp, session, lambda: cdp.call("Page.navigate", {"url": base}, session))
    fill(cdp, session, msg["task"]["solution"])
    answers = [shot(ep, 1, "filled form", True)]
    x, y = cdp.value(BUTTON_JS, session)
    send({"type": "action", "episode_id": ep, "kind": "click", "detail": {"x": x, "y": y}})
    load(cdp, session, lambda: click(cdp, session, x, y))
    answers.append(shot(ep, 2, "saved", False))
    cdp.ws.close()
    report(ep, True, {"viewport": browser.get("viewport"), "answers": answers})


def main() -> None:
    msg = json.loads(sys.stdin.readline())
    ep = msg["episode_id"]
    if MODE == "evidence":
        evidence(msg)
    elif MODE == "many":
        answers = [shot(ep, i, f"n{i}", False) for i in range(int(sys.argv[3]))]
        report(ep, True, [[a["ok"], a.get("error")] for a in answers])
    elif MODE == "flood":
        for i in range(int(sys.argv[3])):
            send({"type": "screenshot", "episode_id": ep, "id": i})
        sys.stdin.read()
    elif MODE == "forged":
        own = shot(ep, "own", "own page", False)
        assert own["ok"], own
        send({"type": "screenshot", "episode_id": ep.replace("::t0", "::t1")})
        sys.stdin.read()


if __name__ == "__main__":
    main()
