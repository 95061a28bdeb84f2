"""The scripted arms' way through MockMed's desktop client: its accessibility tree.

``DesktopFormDriver`` is the desktop twin of ``client.FormDriver``: it fills the form
and presses Save the way a screen-reader user would (AT-SPI selections, text and
actions), then reads the banner back from the tree, so ``screen_only`` and
``effect_verified`` run unchanged on the desktop substrate. It never speaks HTTP: what
it reports is what the window shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import anyio

from effectbench.displays.atspi import AccessibilityError, Node, Ref
from effectbench.displays.desktop import DesktopApp
from effectbench.model import JSONScalar
from effectbench.provider import ProductResponse, Telemetry
from effectbench_mockmed.desktop.form import FIELDS, ID_SEPARATOR, SAVE_TIMEOUT_S

__all__ = ["FIELDS", "DesktopFormDriver"]

BANNER_ID: Final = "banner"
POLL_S: Final = 0.005


class DesktopFormDriver:
    """Fills the form, presses Save and reads the banner, all through AT-SPI."""

    def __init__(self, app: DesktopApp, telemetry: Telemetry) -> None:
        self._app = app
        self._telemetry = telemetry

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        bus = self._app.bus
        tree = await self._app.tree()
        for field, value in values.items():
            name = FIELDS.get(field)
            if name is None:
                continue  # the form has no such field: nothing a user could fill in
            text = "" if value is None else str(value)
            widget = _named(tree, name)
            if widget.role == "combo box":
                await bus.select(widget, _choice(widget, text))
            else:
                await bus.set_text(widget, text)
        save = tree.find(role="push button", name="Save")
        banner = tree.find(accessible_id=BANNER_ID)
        if save is None or banner is None:
            raise AccessibilityError("the desktop client shows no Save button or no banner")
        await bus.do_action(save, "click")
        saved, message = await self._banner(banner.ref)
        self._telemetry.action("submit_form", status=None, screen_says_saved=saved)
        if self._telemetry.wants_screenshots:
            frame = tree.find(role="frame")
            self._telemetry.screenshot(await self._app.screenshot(frame), "after save")
        return ProductResponse(screen_says_saved=saved, status=None, message=message)

    async def _banner(self, ref: Ref) -> tuple[bool, str]:
        """The banner once the client shows its answer (it clears it when Save is
        pressed, before the press's answer returns)."""
        with anyio.move_on_after(SAVE_TIMEOUT_S):
            while True:
                banner = await self._app.bus.node(ref)
                if banner.name and banner.description:  # told once it is painted
                    return banner.description == "saved", banner.name
                await anyio.sleep(POLL_S)
        return False, "The window stopped responding"


def _named(tree: Node, name: str) -> Node:
    for node in tree.walk():
        if node.name == name and node.role in ("combo box", "text"):
            return node
    raise AccessibilityError(f"the desktop client shows no field named {name!r}")


def _choice(combo: Node, value: str) -> int:
    """The index of the combo box item that stands for ``value``: its label is the
    value, or ends with the value after " — " (a patient's chart id)."""
    items = [n for n in combo.walk() if n.role == "menu item"]
    for index, item in enumerate(items):
        if item.name == value or item.name.endswith(f"{ID_SEPARATOR}{value}"):
            return index
    raise AccessibilityError(f"the {combo.name} list offers no {value!r}")
