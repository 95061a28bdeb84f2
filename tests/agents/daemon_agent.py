"""A protocol agent that leaves a daemon behind: for each episode it starts a detached
grandchild (a fork, ``setsid``, a second fork: out of the agent's process group and
session, orphaned to init), which writes its pid to ``PID_PATH`` (a file or a FIFO) and
then lives on. ``daemon_agent.py PID_PATH report|hang``: report once the daemon has
written its pid, or never report. Standard library only."""

from __future__ import annotations

import json
import os
import sys
import threading


def daemonize(pid_path: str) -> None:
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            with open(pid_path, "w") as f:
                f.write(f"{os.getpid()}\n")
            os.write(ready_w, b"x")
            threading.Event().wait()  # lives on, doing nothing
        os._exit(0)
    os.close(ready_w)
    os.read(ready_r, 1)  # the daemon has written its pid
    os.close(ready_r)


def main() -> None:
    pid_path, how = sys.argv[1], sys.argv[2]
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") != "episode":
            continue
        daemonize(pid_path)
        if how == "report":
            report = {"type": "report", "episode_id": msg["episode_id"],
                      "reported_success": False, "halted": True}  # fmt: skip
            sys.stdout.write(json.dumps(report) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
