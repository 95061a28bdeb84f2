"""The scripted arms' way through MockMed's desktop client seen over VNC: pixels only.

``RemoteFormDriver`` is the remote_display twin of ``client.FormDriver``: over the
episode's ``vnc`` channel alone (the RFB connection an arm would open), it reads the
form with OCR, finds each field on its label's row, picks combo box items from the
popup list it reads, types the text fields, clicks Save where it reads it and reads
the banner back: its text by OCR, saved or error by its colour (green or red, the
client's CSS). It never speaks HTTP and never asks the accessibility tree: what it
reports is what the framebuffer shows. Every screen it acted on is kept as evidence
(``telemetry.screenshot``), stored by content hash like the browser's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Final

import anyio

from effectbench.displays.frame import Box, Frame
from effectbench.displays.ocr import Reading
from effectbench.displays.pixels import NotOnScreen, Screen
from effectbench.displays.rfb import open_rfb
from effectbench.displays.vnc import VncChannel
from effectbench.model import JSONScalar
from effectbench.provider import ProductResponse, Telemetry

__all__ = ["FIELDS", "RemoteFormDriver"]

FIELDS: Final = {
    "patient_id": "Patient",
    "type": "Type",
    "status": "Status",
    "note": "Note",
    "key": "Referral reference",
}
"""Form field -> the label shown left of its widget (desktop/gtk_client.py)."""
COMBOS: Final = frozenset({"patient_id", "type", "status"})
FORM_TIMEOUT_S: Final = 20.0
CHANGE_TIMEOUT_S: Final = 10.0
"""How long a click on a combo box may take to open or close its list."""
SETTLE_QUIET_S: Final = 0.3
"""Quiet after a list opened or closed (longer than ``Screen``'s default: the list
slides in over a few frames)."""
SAVE_TIMEOUT_S: Final = 35.0
"""Longer than the client's own HTTP timeout (30 s), which then shows an error banner."""
EDGE: Final = 24
"""A widget's edge: a pixel this far (in summed RGB) from the window's colour."""


class RemoteFormDriver:
    """Fills the form, clicks Save and reads the banner, all through the framebuffer."""

    def __init__(self, channel: VncChannel, telemetry: Telemetry) -> None:
        self._channel = channel
        self._telemetry = telemetry

    @contextlib.asynccontextmanager
    async def _screen(self) -> AsyncIterator[Screen]:
        vnc = self._channel
        async with open_rfb(vnc.password, host=vnc.host, port=vnc.port) as rfb:
            yield Screen(rfb)

    def _keep(self, frame: Frame, label: str) -> None:
        if self._telemetry.wants_screenshots:
            self._telemetry.screenshot(frame.png(), label)

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        async with self._screen() as screen:
            form, save, heading = await self._form(screen)
            for field, value in values.items():
                label = FIELDS.get(field)
                if label is None:
                    continue  # the form has no such field: nothing a user could fill in
                text = "" if value is None else str(value)
                where = form.find(label)
                if where is None:
                    raise NotOnScreen(f"the form shows no {label!r} (read: {_said(form)})")
                widget = _right_of(screen.client.frame, where)
                if field in COMBOS:
                    await self._choose(screen, form, where, widget, text)
                else:
                    await screen.click(*widget.center)
                    await screen.press("a", with_keys=("Control_L",))
                    await screen.type(text)
            filled = await screen.settle()
            self._keep(filled, "filled form")
            await screen.click(*save.center)
            saved, message, shown = await self._banner(screen, heading, save)
            self._keep(shown, "after save")
        self._telemetry.action("submit_form", status=None, screen_says_saved=saved)
        return ProductResponse(screen_says_saved=saved, status=None, message=message)

    async def _form(self, screen: Screen) -> tuple[Reading, Box, Box]:
        """The form once its heading and Save read (a window still painting is read
        again when it changes)."""
        form: Reading | None = None
        with anyio.move_on_after(FORM_TIMEOUT_S):
            while True:
                form = await screen.read()
                save, heading = form.find("Save"), form.find("New encounter")
                if save is not None and heading is not None:
                    return form, save, heading
                await screen.client.changed(FORM_TIMEOUT_S)
        seen = _said(form) if form is not None else "nothing"
        raise NotOnScreen(f"the form is not on the screen (read: {seen})")

    async def _choose(
        self, screen: Screen, form: Reading, label: Box, widget: Box, value: str
    ) -> None:
        """Pick ``value`` in the combo box at ``widget``: nothing when it already shows
        it (on the label's row), else open its list and click the item that reads as it."""
        for line in form.lines:
            if _beside(line.box, label) and _names(line.text, value):
                return
        before = await screen.settle()
        await screen.click(*widget.center)
        after = await _next(screen)  # the list opening (a loaded machine paints late)
        popup = _changed(before, after)
        reading = await screen.read(after, popup)
        for line in reading.lines:
            if _names(line.text, value):
                await screen.click(*line.box.center)
                await _next(screen)  # and closing, before the next field is clicked
                return
        await screen.press("Escape")
        raise NotOnScreen(f"the list offers no {value!r} (read: {_said(reading)})")

    async def _banner(self, screen: Screen, heading: Box, save: Box) -> tuple[bool, str, Frame]:
        """The banner's text and kind once the client shows its answer: the row between
        the heading and the first field, read until it holds text."""
        row = Box(0, heading.bottom + 4, save.right + 16, 40)
        with anyio.move_on_after(SAVE_TIMEOUT_S):
            while True:
                frame = await screen.settle()
                if _painted(frame, row):  # OCR only once something is in the row
                    reading = await screen.read(frame, row)
                    if reading.lines:
                        text = reading.text.replace("\n", " ")
                        return _is_green(frame, reading), text, frame
                await screen.client.changed(SAVE_TIMEOUT_S)
        return False, "The window stopped responding", screen.client.frame


async def _next(screen: Screen) -> Frame:
    """The screen after its next change, once it has settled."""
    await screen.client.changed(CHANGE_TIMEOUT_S)
    return await screen.settle(quiet_s=SETTLE_QUIET_S)


def _said(reading: Reading) -> str:
    return " | ".join(reading.text.splitlines()) or "nothing"


def _names(text: str, value: str) -> bool:
    """Whether an item reads as ``value``: its text, or its last word (a chart id after
    " — ")."""
    words = text.split()
    return text.strip().casefold() == value.casefold() or (
        bool(words) and words[-1].casefold() == value.casefold()
    )


def _beside(shown: Box, label: Box) -> bool:
    """Whether ``shown`` is right of ``label`` on its row."""
    return shown.x > label.right and abs(shown.center[1] - label.center[1]) <= label.height


def _far(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) > EDGE


def _right_of(frame: Frame, label: Box) -> Box:
    """The widget on ``label``'s row: from the first pixel right of the label that
    differs from the window's colour to the last one before the window's colour
    resumes for good (its right edge), as tall as the label's row."""
    y = label.center[1]
    window = frame.pixel(label.right + 2, y)
    x = label.right + 2
    while x < frame.width - 1 and not _far(frame.pixel(x, y), window):
        x += 1
    start = x
    last = start
    while x < frame.width - 1:
        if _far(frame.pixel(x, y), window):
            last = x
        elif x - last > 40:
            break
        x += 1
    return Box(start, label.y - 4, max(8, last - start), label.height + 8)


def _changed(before: Frame, after: Frame) -> Box | None:
    """The box of every pixel that differs between two frames (a popup that opened)."""
    from PIL import ImageChops

    bbox = ImageChops.difference(before.image(), after.image()).getbbox()
    if bbox is None:
        return None
    left, top, right, bottom = bbox
    return Box(left, top, right - left, bottom - top)


def _painted(frame: Frame, row: Box) -> bool:
    """Whether anything but the window's colour shows in ``row`` (sampled every 4 px)."""
    window = frame.pixel(2, row.y)
    return any(
        _far(frame.pixel(x, y), window)
        for y in range(row.y, min(frame.height, row.bottom), 4)
        for x in range(row.x + 2, min(frame.width, row.right), 4)
    )


def _is_green(frame: Frame, reading: Reading) -> bool:
    """The banner's kind from its colour: the client paints a saved banner green and
    an error red (the most common colour behind its text, which is not the window's)."""
    area = reading.lines[0].box
    window = frame.pixel(2, area.center[1])  # the window's left margin, beside the banner
    colours: dict[tuple[int, int, int], int] = {}
    for x in range(max(0, area.x - 6), min(frame.width, area.right + 6), 2):
        for y in (max(0, area.y - 3), min(frame.height - 1, area.bottom + 3)):
            colour = frame.pixel(x, y)
            if colour != window:
                colours[colour] = colours.get(colour, 0) + 1
    if not colours:
        return False
    red, green, _ = max(colours, key=lambda c: colours[c])
    return green > red
