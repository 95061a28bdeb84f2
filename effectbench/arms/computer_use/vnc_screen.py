"""The computer-use arm's screen on a remote_display episode: the framebuffer over VNC.

A remote_display episode hands the arm nothing but its ``vnc`` channel (docs/substrates.md),
so this screen is the whole of what the model sees and does: each capture is the
framebuffer once it stopped changing, as PNG; each action is RFB pointer and key events
at framebuffer coordinates. The viewport is the framebuffer's own size, so the action
space is the web one's, unchanged, with coordinates on the remote screen.
"""

from __future__ import annotations

import math
from typing import Final

import anyio

from effectbench.arms.computer_use.actions import (
    Action,
    Click,
    Done,
    DoubleClick,
    Drag,
    Key,
    Move,
    Screenshot,
    Scroll,
    Type,
    Viewport,
    Wait,
)
from effectbench.displays.pixels import Screen as PixelScreen
from effectbench.displays.rfb import BUTTONS, RfbClient, keysym

__all__ = ["VncScreen", "combo_keysyms"]

SCROLL_NOTCH_PX: Final = 50
"""Pixels one wheel notch stands for (a model asks for pixels; RFB sends notches)."""
DRAG_STEPS: Final = 8
_WHEEL: Final = {"up": 8, "down": 16, "left": 32, "right": 64}
"""RFB's wheel buttons 4-7 as pointer-event masks."""
_KEYSYMS: Final = {
    "Control": 0xFFE3, "Shift": 0xFFE1, "Alt": 0xFFE9, "Meta": 0xFFEB,
    "Enter": 0xFF0D, "Tab": 0xFF09, "Escape": 0xFF1B, "Backspace": 0xFF08,
    "Delete": 0xFFFF, "Insert": 0xFF63, "Home": 0xFF50, "End": 0xFF57,
    "PageUp": 0xFF55, "PageDown": 0xFF56, "ArrowLeft": 0xFF51, "ArrowUp": 0xFF52,
    "ArrowRight": 0xFF53, "ArrowDown": 0xFF54, "Space": 0x20,
    **{f"F{n}": 0xFFBE + n - 1 for n in range(1, 13)},
}  # fmt: skip
"""X keysyms of the key names ``actions.normalise_combo`` writes (keysymdef.h)."""


def combo_keysyms(combo: str) -> list[int]:
    """The keysyms of a normalised chord (``Control+a``): modifiers first, the key last."""
    parts = ["+"] if combo == "+" else combo.split("+")
    return [_KEYSYMS[p] if p in _KEYSYMS else keysym(p) for p in parts if p]


class VncScreen:
    """One RFB connection to the episode's display, as the arm's ``Screen``."""

    def __init__(self, client: RfbClient) -> None:
        self.client = client
        self._pixels = PixelScreen(client)
        frame = client.frame
        self.viewport = Viewport(frame.width, frame.height)

    async def capture(self) -> bytes:
        return (await self._pixels.settle()).png()

    async def perform(self, action: Action) -> None:
        client = self.client
        match action:
            case Click(x, y, button):
                await client.click(x, y, button)
            case DoubleClick(x, y):
                await client.click(x, y)
                await client.click(x, y)
            case Move(x, y):
                await client.move(x, y)
            case Drag(x, y, to_x, to_y):
                await self._drag(x, y, to_x, to_y)
            case Type(text):
                await client.type(text)
            case Key(combo):
                await self._chord(combo_keysyms(combo))
            case Scroll(x, y, dx, dy):
                await self._scroll(x, y, dx, dy)
            case Wait(ms):
                await anyio.sleep(ms / 1000.0)
            case Screenshot() | Done():
                return

    async def _drag(self, x: int, y: int, to_x: int, to_y: int) -> None:
        left = BUTTONS["left"]
        await self.client.move(x, y)
        await self.client.move(x, y, left)
        for step in range(1, DRAG_STEPS + 1):
            at_x = x + (to_x - x) * step // DRAG_STEPS
            at_y = y + (to_y - y) * step // DRAG_STEPS
            await self.client.move(at_x, at_y, left)
        await self.client.move(to_x, to_y)

    async def _chord(self, syms: list[int]) -> None:
        *held, last = syms
        for sym in held:
            await self.client.key(sym, down=True)
        await self.client.key(last)
        for sym in reversed(held):
            await self.client.key(sym, down=False)

    async def _scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        await self.client.move(x, y)
        for delta, (back, forth) in ((dy, ("up", "down")), (dx, ("left", "right"))):
            mask = _WHEEL[forth if delta > 0 else back]
            for _ in range(math.ceil(abs(delta) / SCROLL_NOTCH_PX)):
                await self.client.move(x, y, mask)
                await self.client.move(x, y)
