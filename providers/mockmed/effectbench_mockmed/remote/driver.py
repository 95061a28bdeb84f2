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
from effectbench.displays.widgets import (
    changed,
    item,
    looks_green,
    painted,
    right_of,
    row_below,
    said,
    shows,
)
from effectbench.model import JSONScalar
from effectbench.provider import ProductResponse, Telemetry
from effectbench_mockmed.desktop.form import COMBOS, FIELDS, SAVE_TIMEOUT_S

__all__ = ["FIELDS", "RemoteFormDriver"]

FORM_TIMEOUT_S: Final = 20.0
CHANGE_TIMEOUT_S: Final = 10.0
"""How long a click on a combo box may take to open or close its list."""
SETTLE_QUIET_S: Final = 0.3
"""Quiet after a list opened or closed (longer than ``Screen``'s default: the list
slides in over a few frames)."""


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
                    raise NotOnScreen(f"the form shows no {label!r} (read: {said(form)})")
                widget = right_of(screen.client.frame, where)
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
        seen = said(form) if form is not None else "nothing"
        raise NotOnScreen(f"the form is not on the screen (read: {seen})")

    async def _choose(
        self, screen: Screen, form: Reading, label: Box, widget: Box, value: str
    ) -> None:
        """Pick ``value`` in the combo box at ``widget``: nothing when it already shows
        it (on the label's row), else open its list and click the item that reads as it."""
        if shows(form, label, value):
            return
        before = await screen.settle()
        await screen.click(*widget.center)
        after = await _next(screen)  # the list opening (a loaded machine paints late)
        reading = await screen.read(after, changed(before, after))
        chosen = item(reading, value)
        if chosen is not None:
            await screen.click(*chosen.box.center)
            await _next(screen)  # and closing, before the next field is clicked
            return
        await screen.press("Escape")
        raise NotOnScreen(f"the list offers no {value!r} (read: {said(reading)})")

    async def _banner(self, screen: Screen, heading: Box, save: Box) -> tuple[bool, str, Frame]:
        """The banner's text and kind once the client shows its answer: the row between
        the heading and the first field, read until it holds text."""
        row = row_below(heading, save.right + 16)
        with anyio.move_on_after(SAVE_TIMEOUT_S):
            while True:
                frame = await screen.settle()
                if painted(frame, row):  # OCR only once something is in the row
                    reading = await screen.read(frame, row)
                    if reading.lines:
                        text = reading.text.replace("\n", " ")
                        return looks_green(frame, reading.lines[0].box), text, frame
                await screen.client.changed(SAVE_TIMEOUT_S)
        return False, "The window stopped responding", screen.client.frame


async def _next(screen: Screen) -> Frame:
    """The screen after its next change, once it has settled."""
    await screen.client.changed(CHANGE_TIMEOUT_S)
    return await screen.settle(quiet_s=SETTLE_QUIET_S)
