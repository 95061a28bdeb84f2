"""A form's widgets found from its pixels: what a pixels-only reader of a GUI needs
beyond the words OCR gives (displays/ocr.py).

A form laid out as rows of a label and its widget is read the way a person reads it:
the widget is what starts right of the label on the label's row, a combo box's list is
whatever changed on the screen when it was clicked, an item is the line that reads as
the value wanted, and a banner's kind is its colour. One home for MockMed's remote
driver (the scripted baselines) and the computer-use arm's stand-in model, which read
the same client the same way.
"""

from __future__ import annotations

from typing import Final

from effectbench.displays.frame import Box, Frame
from effectbench.displays.ocr import Line, Reading

__all__ = [
    "EDGE",
    "beside",
    "changed",
    "item",
    "looks_green",
    "painted",
    "reads_as",
    "right_of",
    "row_below",
    "said",
    "shows",
]

EDGE: Final = 24
"""A widget's edge: a pixel this far (in summed RGB) from the window's colour."""
GAP: Final = 40
"""Pixels of the window's colour after which a widget has ended for good."""
BANNER_HEIGHT: Final = 40


def said(reading: Reading) -> str:
    """What a reading read, on one line (for a message saying what was seen)."""
    return " | ".join(reading.text.splitlines()) or "nothing"


def reads_as(text: str, value: str) -> bool:
    """Whether a line reads as ``value``: its text, or its last word (an id after its
    label, as a chart list shows "Ada Moreau (referred) — p1"), case aside."""
    words = text.split()
    return text.strip().casefold() == value.casefold() or (
        bool(words) and words[-1].casefold() == value.casefold()
    )


def beside(shown: Box, label: Box) -> bool:
    """Whether ``shown`` is right of ``label`` on its row."""
    return shown.x > label.right and abs(shown.center[1] - label.center[1]) <= label.height


def shows(reading: Reading, label: Box, value: str) -> bool:
    """Whether the widget on ``label``'s row reads as ``value`` (a combo box showing it)."""
    return any(beside(line.box, label) and reads_as(line.text, value) for line in reading.lines)


def item(reading: Reading, value: str) -> Line | None:
    """The first line that reads as ``value`` (an item of an open list), or None."""
    return next((line for line in reading.lines if reads_as(line.text, value)), None)


def _far(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) > EDGE


def right_of(frame: Frame, label: Box) -> Box:
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
        elif x - last > GAP:
            break
        x += 1
    return Box(start, label.y - 4, max(8, last - start), label.height + 8)


def changed(before: Frame, after: Frame) -> Box | None:
    """The box of every pixel that differs between two frames (a list that opened), or
    None when they are the same."""
    from PIL import ImageChops

    bbox = ImageChops.difference(before.image(), after.image()).getbbox()
    if bbox is None:
        return None
    left, top, right, bottom = bbox
    return Box(left, top, right - left, bottom - top)


def row_below(heading: Box, right: int) -> Box:
    """The row under a form's heading, up to ``right``: where MockMed's client shows
    its banner (between the heading and the first field)."""
    return Box(0, heading.bottom + 4, right, BANNER_HEIGHT)


def painted(frame: Frame, row: Box) -> bool:
    """Whether anything but the window's colour shows in ``row`` (sampled every 4 px):
    read a row with OCR only once this holds."""
    window = frame.pixel(2, row.y)
    return any(
        _far(frame.pixel(x, y), window)
        for y in range(row.y, min(frame.height, row.bottom), 4)
        for x in range(row.x + 2, min(frame.width, row.right), 4)
    )


def looks_green(frame: Frame, area: Box) -> bool:
    """Whether the colour behind the text in ``area`` is green rather than red (a saved
    banner, not an error): the most common colour just above and below the text that
    is not the window's."""
    window = frame.pixel(2, area.center[1])  # the window's left margin, beside the text
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
