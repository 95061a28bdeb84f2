"""A pixels-only driver's hands and eyes on a remote display: what it sees is the
framebuffer, what it does is pointer and key events (displays/rfb.py).

``Screen`` waits for the screen to settle, reads its text (displays/ocr.py), finds a
phrase or an exact image (a template cut from an earlier frame) on it, and clicks and
types there. Nothing here asks anything but the VNC server for pixels: no DOM, no
accessibility tree, no product API. It counts its OCR passes and their seconds, the
cost of reading a screen this way (docs/substrates.md).
"""

from __future__ import annotations

from typing import Final

import anyio
import anyio.to_thread
import attrs

from effectbench.displays.frame import Box, Frame
from effectbench.displays.ocr import Reading, read_text
from effectbench.displays.rfb import RfbClient

__all__ = ["NotOnScreen", "OcrCost", "Screen", "find_template"]

QUIET_S: Final = 0.15
"""How long the screen must not change to count as settled (GTK redraws a change in
one or two frames, well within it)."""
SETTLE_TIMEOUT_S: Final = 10.0


class NotOnScreen(LookupError):
    """What a driver looked for was not read on the screen in time; says what it read."""


@attrs.define
class OcrCost:
    """OCR passes so far and their wall seconds."""

    reads: int = 0
    seconds: float = 0.0


class Screen:
    """One RFB connection seen as a screen to read and act on."""

    def __init__(self, client: RfbClient) -> None:
        self.client = client
        self.cost = OcrCost()

    async def settle(
        self, *, quiet_s: float = QUIET_S, timeout_s: float = SETTLE_TIMEOUT_S
    ) -> Frame:
        """The screen once it stopped changing for ``quiet_s`` (or as it is after
        ``timeout_s``, for a screen that never stops, such as a blinking cursor)."""
        with anyio.move_on_after(timeout_s):
            while await self.client.changed(quiet_s) is not None:
                pass
        return self.client.frame

    async def read(self, frame: Frame | None = None, box: Box | None = None) -> Reading:
        """The text on ``frame`` (default: the settled screen), in ``box`` if given."""
        shown = frame if frame is not None else await self.settle()
        reading = await anyio.to_thread.run_sync(read_text, shown, box)
        self.cost.reads += 1
        self.cost.seconds += reading.seconds
        return reading

    async def wait_for(self, phrase: str, *, timeout_s: float = SETTLE_TIMEOUT_S) -> Box:
        """Where ``phrase`` shows, waiting for the screen to change until it does."""
        reading: Reading | None = None
        with anyio.move_on_after(timeout_s):
            while True:
                reading = await self.read()
                found = reading.find(phrase)
                if found is not None:
                    return found
                await self.client.changed(timeout_s)
        seen = " | ".join(reading.text.splitlines()) if reading is not None else "nothing"
        raise NotOnScreen(f"{phrase!r} was not on the screen within {timeout_s:g} s (read: {seen})")

    async def click(self, x: int, y: int) -> None:
        await self.client.click(x, y)

    async def click_text(self, phrase: str, *, timeout_s: float = SETTLE_TIMEOUT_S) -> Box:
        """Click the middle of ``phrase`` where it shows; its box."""
        box = await self.wait_for(phrase, timeout_s=timeout_s)
        await self.client.click(*box.center)
        return box

    async def type(self, text: str) -> None:
        await self.client.type(text)

    async def press(self, name: str, *, with_keys: tuple[str, ...] = ()) -> None:
        await self.client.press(name, with_keys=with_keys)


def find_template(frame: Frame, template: Frame) -> Box | None:
    """Where ``template`` appears pixel for pixel in ``frame`` (the first place, top to
    bottom), or None: its first row is searched for in each row of the frame, and
    each hit checked row by row."""
    if template.width > frame.width or template.height > frame.height or template.width == 0:
        return None
    row = template.width * 4
    stride = frame.width * 4
    first = template.pixels[:row]
    pixels = frame.pixels
    for y in range(frame.height - template.height + 1):
        start = y * stride
        end = start + stride
        at = pixels.find(first, start, end)
        while at >= 0:
            if (at - start) % 4 == 0 and at - start + row <= stride:
                x = (at - start) // 4
                if all(
                    pixels[(y + r) * stride + x * 4 :][:row] == template.pixels[r * row :][:row]
                    for r in range(1, template.height)
                ):
                    return Box(x, y, template.width, template.height)
            at = pixels.find(first, at + 1, end)
    return None
