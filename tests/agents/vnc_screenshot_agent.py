"""A protocol agent on a remote_display episode that asks the harness for a screenshot
of its screen and checks the image it gets back (standard library only).

It reads its ``vnc`` channel's greeting (so it did reach its screen), sends one action,
asks for a screenshot with the image, and reports JSON: the greeting and the answer,
the image replaced by its sha256 and pixel size as the agent read them from the PNG.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import sys


def send(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    episode = json.loads(sys.stdin.readline())
    ep = episode["episode_id"]
    vnc = json.loads(episode["channels"]["vnc"])
    with socket.create_connection((vnc["host"], vnc["port"]), timeout=10) as sock:
        greeting = sock.recv(12).decode()
    send({"type": "action", "episode_id": ep, "kind": "look", "detail": {"x": 10, "y": 20}})
    send({"type": "screenshot", "episode_id": ep, "id": 1, "label": "my screen", "image": True})
    answer = json.loads(sys.stdin.readline())
    png = base64.b64decode(answer.pop("png_base64", ""))
    if png:
        width, height = struct.unpack(">II", png[16:24])
        answer["checked"] = {
            "sha256": hashlib.sha256(png).hexdigest(),
            "width": width,
            "height": height,
        }
    found = {"greeting": greeting, "answer": answer}
    send(
        {
            "type": "report",
            "episode_id": ep,
            "reported_success": False,
            "halted": True,
            "message": json.dumps(found),
        }
    )


main()
