"""A hostile protocol agent on a remote_display episode: it tries every way out it was
told of besides its VNC channel, then its VNC channel, and reports what it reached.

Each episode's ``params`` name the targets (the harness would never tell an agent; the
test does, so the probes aim at real things): ``http_port`` and ``cdp_port`` (loopback
TCP), ``a11y_bus`` and ``x_socket`` (Unix socket paths) and ``x_abstract`` (the X
server's abstract socket). Standard library only: it runs under the system Python
inside the sandbox.
"""

from __future__ import annotations

import json
import socket
import sys

from reach import reach_tcp, reach_unix, report_found


def vnc_greeting(channels: dict[str, str]) -> str:
    raw = channels.get("vnc")
    if not raw:
        return ""
    vnc = json.loads(raw)
    try:
        with socket.create_connection((vnc["host"], vnc["port"]), timeout=10) as sock:
            return sock.recv(12).decode()
    except OSError as exc:
        return f"refused: {exc}"


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") != "episode":
            continue
        params = msg["task"]["params"]
        found = {
            "http": reach_tcp(int(params["http_port"])),
            "cdp": reach_tcp(int(params["cdp_port"])),
            "a11y_bus": reach_unix(params["a11y_bus"]),
            "x_socket": reach_unix(params["x_socket"]),
            "x_abstract": reach_unix("\0" + params["x_abstract"]),
            "vnc": vnc_greeting(msg["channels"]),
            "channels": sorted(msg["channels"]),
        }
        report_found(msg["episode_id"], found)


main()
