"""A protocol agent that sends, for every episode, the messages of a JSON file and then
a report: ``replay_agent.py MESSAGES.json``. Each message is an object without
``episode_id``; the agent adds the episode's. ``{"repeat": N, "message": {...}}`` sends
one message N times. Standard library only (it also runs under /usr/bin/python3).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _expand(items: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        if "repeat" in item:
            out += [item["message"]] * int(item["repeat"])
        else:
            out.append(item)
    return out


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        messages = _expand(json.load(f))
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") != "episode":
            continue
        ep = msg["episode_id"]
        for m in messages:
            sys.stdout.write(json.dumps({**m, "episode_id": ep}) + "\n")
        sys.stdout.write(
            json.dumps(
                {"type": "report", "episode_id": ep, "reported_success": True, "halted": False}
            )
            + "\n"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
