"""A hostile protocol agent on a desktop episode: it tries every way out it was told of
besides its ``desktop`` channel, then reads its application's tree through that channel,
and reports what it reached.

Each episode's ``params`` name the targets (the harness would never tell an agent; the
test does, so the probes aim at real things): ``http_port`` and ``cdp_port`` (loopback
TCP); ``x_socket``, ``session_bus``, ``own_bus`` and ``other_buses`` (Unix socket paths
on the host: the display's X socket and session bus, its own accessibility bus and other
episodes', ``|`` between them); ``x_abstract`` (the X server's abstract socket); and
``crowd``, how many connections it opens to its own bus at once. It runs under the
harness's venv, whose dbus-fast and ``effectbench.displays`` it uses.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
from typing import Any

from reach import reach_tcp, reach_unix, report_found

from effectbench.displays.desktop import DesktopChannel


async def own_bus(channels: dict[str, str]) -> dict[str, Any]:
    """What the episode's own accessibility bus shows: the application's frame, how
    many nodes its tree has, and whether the bus says the application is the
    channel's process (so the bus reached is that episode's own)."""
    channel = DesktopChannel.from_channels(channels)
    if channel is None:
        return {"error": "no desktop channel"}
    try:
        bus = await asyncio.wait_for(channel.connect(), 10)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return {"error": f"{type(exc).__name__}: {exc}"}
    try:
        tree = await bus.tree(channel.application)
        frame = tree.find(role="frame")
        return {
            "address": channel.a11y_bus,
            "frame": None if frame is None else frame.name,
            "nodes": sum(1 for _ in tree.walk()),
            "is_the_channels_app": await bus.application(channel.pid) == channel.application,
        }
    finally:
        await bus.close()


def crowd(channels: dict[str, str], many: int) -> list[str]:
    """Open ``many`` connections to its bus at once, each starting the handshake: what
    each is answered first (``OK``, or nothing when the relay closed it at once)."""
    channel = DesktopChannel.from_channels(channels)
    if channel is None or not channel.a11y_bus.startswith("unix:path="):
        return []
    path = channel.a11y_bus.removeprefix("unix:path=").split(",")[0]
    identity = str(os.getuid()).encode().hex().encode()
    answers, held = [], []
    try:
        for _ in range(many):
            sock = socket.socket(socket.AF_UNIX)
            held.append(sock)
            sock.settimeout(10)
            sock.connect(path)
            try:
                sock.sendall(b"\0AUTH EXTERNAL " + identity + b"\r\n")
                answers.append(sock.recv(64)[:2].decode())
            except ConnectionError:  # closed with its line unread: a reset
                answers.append("")
            except TimeoutError:
                answers.append("timeout")
    finally:
        for sock in held:
            sock.close()
    return answers


def probe(msg: dict[str, Any]) -> None:
    params, channels = msg["task"]["params"], msg["channels"]
    found = {
        "http": reach_tcp(int(params["http_port"])),
        "cdp": reach_tcp(int(params["cdp_port"])),
        "x_socket": reach_unix(params["x_socket"]),
        "x_abstract": reach_unix("\0" + params["x_abstract"]),
        "session_bus": reach_unix(params["session_bus"]),
        "other_buses": [reach_unix(p) for p in params["other_buses"].split("|")],
        "own_bus_by_host_path": reach_unix(params["own_bus"]),
        "channels": sorted(channels),
        "bus": asyncio.run(own_bus(channels)),
        "crowd": crowd(channels, int(params["crowd"])),
    }
    report_found(msg["episode_id"], found)


def guarded(msg: dict[str, Any]) -> None:
    """A probe that raised reports why at once (not at the episode's deadline)."""
    try:
        probe(msg)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        report_found(msg["episode_id"], {"error": f"{type(exc).__name__}: {exc}"})


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") == "episode":  # episodes at once: a long-lived agent holds both
            threading.Thread(target=guarded, args=(msg,)).start()


main()
