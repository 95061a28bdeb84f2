"""Text read off a framebuffer with tesseract: the words, where each is, and the cost.

The only source is the image. Before OCR the frame is cut to what differs from its
background (the root window's colour, the one most corners show), so a window on an
empty screen costs its own area, and scaled up 2x (a UI's 11-13 px text is read far
better at twice the size: tesseract's models are trained on larger glyphs).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from typing import Final

import attrs

from effectbench.displays.frame import Box, Frame

__all__ = ["Line", "Reading", "Word", "background", "content_box", "read_text"]

SCALE: Final = 2
MIN_CONFIDENCE: Final = 30.0
"""Words tesseract is less sure of are dropped (specks, widget edges read as ``|``)."""
CONFIG: Final = "--psm 11"
"""Sparse text: each label, field value and button read as a line of its own (full-page
segmentation joins a label and its field's value, and costs half as much again)."""
_WORD: Final = re.compile(r"[^\w]+")


def _norm(text: str) -> str:
    return _WORD.sub("", text).casefold()


@attrs.frozen
class Word:
    text: str
    box: Box
    confidence: float


@attrs.frozen
class Line:
    """Words tesseract put on one line, left to right."""

    words: tuple[Word, ...]

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)

    @property
    def box(self) -> Box:
        return _span(self.words)


@attrs.frozen
class Reading:
    """What one OCR pass read, and what it cost (wall seconds, the tesseract process
    included)."""

    lines: tuple[Line, ...]
    seconds: float
    area: Box | None
    """The part of the frame that was read (None: nothing but background)."""

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    def find(self, phrase: str) -> Box | None:
        """Where ``phrase`` (its words in order on one line, case and punctuation
        aside) was read, or None."""
        wanted = [_norm(w) for w in phrase.split() if _norm(w)]
        if not wanted:
            return None
        for line in self.lines:
            words = [_norm(w.text) for w in line.words]
            for start in range(len(words) - len(wanted) + 1):
                if words[start : start + len(wanted)] == wanted:
                    return _span(line.words[start : start + len(wanted)])
        return None

    def line_with(self, phrase: str) -> Line | None:
        """The first line whose text contains ``phrase`` (case aside)."""
        wanted = phrase.casefold()
        return next((ln for ln in self.lines if wanted in ln.text.casefold()), None)


def _span(words: Sequence[Word]) -> Box:
    x = min(w.box.x for w in words)
    y = min(w.box.y for w in words)
    right = max(w.box.right for w in words)
    bottom = max(w.box.bottom for w in words)
    return Box(x, y, right - x, bottom - y)


def background(frame: Frame) -> tuple[int, int, int]:
    """The screen's background colour: the one most of its four corners show (a
    window in one corner leaves the other three to the root window)."""
    right, bottom = frame.width - 1, frame.height - 1
    corners = [frame.pixel(x, y) for x, y in ((0, 0), (right, 0), (0, bottom), (right, bottom))]
    return max(corners, key=corners.count)


def content_box(frame: Frame) -> Box | None:
    """The smallest box holding every pixel that is not the background's colour, or
    None when the screen is all background."""
    from PIL import Image, ImageChops

    image = frame.image()
    background_image = Image.new("RGB", image.size, background(frame))
    bbox = ImageChops.difference(image, background_image).getbbox()
    if bbox is None:
        return None
    left, top, right, bottom = bbox
    return Box(left, top, right - left, bottom - top)


def read_text(frame: Frame, box: Box | None = None) -> Reading:
    """OCR ``frame`` (within ``box``, or within its content). Blocking: it runs the
    tesseract binary; call it from a worker thread in async code."""
    import pytesseract
    from PIL import ImageOps

    # One OpenMP thread a read: episodes read screens side by side, and tesseract's
    # threads spin for each other (15-20 % more CPU a read on two cores). pytesseract
    # starts tesseract with os.environ; a value the user set is kept.
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    started = time.perf_counter()
    area = box if box is not None else content_box(frame)
    if area is None or area.width == 0 or area.height == 0:
        return Reading((), time.perf_counter() - started, None)
    image = ImageOps.grayscale(frame.image(area))
    image = image.resize((image.width * SCALE, image.height * SCALE))
    data = pytesseract.image_to_data(image, config=CONFIG, output_type=pytesseract.Output.DICT)
    lines: dict[tuple[int, int, int], list[Word]] = {}
    for i, text in enumerate(data["text"]):
        confidence = float(data["conf"][i])
        if not text.strip() or confidence < MIN_CONFIDENCE:
            continue
        word_box = Box(
            area.x + data["left"][i] // SCALE,
            area.y + data["top"][i] // SCALE,
            max(1, data["width"][i] // SCALE),
            max(1, data["height"][i] // SCALE),
        )
        key = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
        lines.setdefault(key, []).append(Word(text.strip(), word_box, confidence))
    ordered = sorted(lines.values(), key=lambda ws: (ws[0].box.y, ws[0].box.x))
    found = tuple(Line(tuple(sorted(ws, key=lambda w: w.box.x))) for ws in ordered)
    return Reading(found, time.perf_counter() - started, area)
