"""What a hostile probe agent tries (can it open a loopback TCP port, or a Unix socket:
a path, or an abstract name after a NUL byte?) and how it tells what it reached.
Standard library only, imported by the probe agents beside it (vnc_probe_agent.py runs
under the system Python)."""

from __future__ import annotations

import json
import socket
import sys
import threading
from typing import Any

_out = threading.Lock()


def reach_tcp(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            return True
    except OSError:
        return False


def reach_unix(address: str) -> bool:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(3)
        try:
            sock.connect(address)
            return True
        except OSError:
            return False


def report_found(episode_id: str, found: dict[str, Any]) -> None:
    """The episode's report: halted, its message the JSON of what was reached."""
    report = {
        "type": "report",
        "episode_id": episode_id,
        "reported_success": False,
        "halted": True,
        "message": json.dumps(found),
    }
    with _out:  # episodes on threads of one process
        sys.stdout.write(json.dumps(report) + "\n")
        sys.stdout.flush()
