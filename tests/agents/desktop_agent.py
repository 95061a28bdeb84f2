"""A protocol agent that fills MockMed's desktop form through its accessibility bus and
trusts the banner, as screen_only does: it reads the application's tree over the bus its
``desktop`` channel names, sets each field of the task's solution (a combo box by
selecting the item that stands for the value, a text by setting its contents), presses
Save through its AT-SPI action and reads the banner. It runs under the harness's venv
(dbus-fast, ``effectbench.displays.atspi``), one thread per episode.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

from effectbench_mockmed.desktop.driver import BANNER_ID, FIELDS, ID_SEPARATOR

from effectbench.displays.atspi import AccessibilityBus, Node
from effectbench.displays.desktop import DesktopChannel

_out = threading.Lock()


def send(message: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


async def fill(bus: AccessibilityBus, tree: Node, solution: dict[str, Any]) -> None:
    widgets = {n.name: n for n in tree.walk() if n.role in ("combo box", "text")}
    for field, value in solution.items():
        widget = widgets.get(FIELDS.get(field, ""))
        text = "" if value is None else str(value)
        if widget is None:
            continue
        if widget.role == "text":
            await bus.set_text(widget, text)
            continue
        labels = [n.name for n in widget.walk() if n.role == "menu item"]
        # an item stands for the value when it is the value or ends in " — <value>" (a chart id)
        stands = [label == text or label.endswith(ID_SEPARATOR + text) for label in labels]
        await bus.select(widget, stands.index(True))


async def save(channel: DesktopChannel, solution: dict[str, Any]) -> tuple[bool, str]:
    """Fill, press Save, and what the banner then says (saved or not, its text)."""
    bus = await channel.connect()
    try:
        tree = await bus.tree(channel.application)
        await fill(bus, tree, solution)
        button = tree.find(role="push button", name="Save")
        banner = tree.find(accessible_id=BANNER_ID)
        assert button is not None and banner is not None, "no Save button or banner"
        await bus.do_action(button, "click")
        while not ((shown := await bus.node(banner.ref)).name and shown.description):
            await asyncio.sleep(0.01)  # the client tells the banner once it is painted
        return shown.description == "saved", shown.name
    finally:
        await bus.close()


def episode(msg: dict[str, Any]) -> None:
    ep = msg["episode_id"]
    try:
        channel = DesktopChannel.from_channels(msg["channels"])
        if channel is None or not msg["task"].get("solution"):
            raise ValueError("no desktop channel or no solution")
        saved, text = asyncio.run(save(channel, msg["task"]["solution"]))
    except Exception as exc:  # noqa: BLE001 - told to the harness, which fails the episode
        send({"type": "error", "episode_id": ep, "message": f"{type(exc).__name__}: {exc}"})
        return
    send({"type": "action", "episode_id": ep, "kind": "submit_form",
          "detail": {"screen_says_saved": saved, "channel": "atspi"}})  # fmt: skip
    send({"type": "report", "episode_id": ep, "reported_success": saved,
          "halted": not saved, "message": text})  # fmt: skip


def main() -> None:
    threads = []
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") == "episode":
            threads.append(threading.Thread(target=episode, args=(msg,)))
            threads[-1].start()
    for thread in threads:
        thread.join()


main()
