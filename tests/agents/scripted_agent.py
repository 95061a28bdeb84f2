"""A protocol agent for the failure-mode tests: each task's name says how it misbehaves.

The behaviour is the task id's last part (``fake::<behaviour>``), read from the episode
id ``<arm>::fake::<behaviour>::t<trial>``. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any

_out = threading.Lock()


def send(obj: Any) -> None:
    write(json.dumps(obj) + "\n")


def write(text: str) -> None:
    with _out:
        sys.stdout.write(text)
        sys.stdout.flush()


def report(ep: str, **extra: Any) -> None:
    send({"type": "report", "episode_id": ep, "reported_success": True, "halted": False,
          "message": "done", **extra})  # fmt: skip


def behave(ep: str, how: str) -> None:
    if how.startswith("report"):
        send({"type": "action", "episode_id": ep, "kind": "submit_form", "detail": {"status": 200}})
        send({"type": "model_call", "episode_id": ep, "input_tokens": 12, "output_tokens": 3,
              "cost_usd": 0.001, "latency_ms": 40.5})  # fmt: skip
        report(ep)
    elif how == "not_json":
        write("this is not json\n")
        report(ep)  # a shared process cannot pin the line on anyone: this report still counts
    elif how == "bad_report":
        send({"type": "report", "episode_id": ep, "reported_success": "yes", "halted": False})
    elif how == "unknown":
        report("someone-else::fake::x::t0")
    elif how.startswith("crash"):
        os._exit(3)
    elif how == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "exit":
        sys.stdout.flush()
        os._exit(0)
    elif how == "hang":
        return
    elif how == "close_stdout":
        os.close(1)  # and keeps running, reading its stdin
    elif how == "flood":
        write("x" * (3 << 20))  # no newline: longer than any line may be
        write("\n")
        report(ep)
    elif how == "error":
        send({"type": "error", "episode_id": ep, "message": "the form never loaded"})
    elif how == "actions":
        for i in range(10_001):
            send({"type": "action", "episode_id": ep, "kind": "click", "detail": {"i": i}})
        report(ep)


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") != "episode":
            continue
        ep = msg["episode_id"]
        threading.Thread(target=behave, args=(ep, ep.split("::")[-2]), daemon=True).start()


if __name__ == "__main__":
    main()
