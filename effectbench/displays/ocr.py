"""Text read off a framebuffer with tesseract: the words, where each is, and the cost.

The only source is the image. Before OCR the frame is cut to what differs from its
background (the root window's colour, the one most corners show), so a window on an
empty screen costs its own area, and scaled up 2x (a UI's 11-13 px text is read far
better at twice the size: tesseract's models are trained on larger glyphs).

Tesseract runs in this process (tesserocr's engine over the host's English model), not
as a program per read: starting the program and loading its model cost ~90 ms of CPU,
more than half of reading a form. Engines are kept and lent to one read at a time, at
most one per core (a read is all CPU, and tesseract releases the GIL while it works).
"""

from __future__ import annotations

import contextlib
import csv
import functools
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from effectbench.displays.frame import Box, Frame
from effectbench.displays.tools import DisplaysUnavailable

if TYPE_CHECKING:
    from PIL.Image import Image
    from tesserocr import PyTessBaseAPI

__all__ = [
    "Line",
    "OcrUnavailable",
    "Reading",
    "Word",
    "background",
    "content_box",
    "read_text",
    "tessdata",
]

SCALE: Final = 2
MIN_CONFIDENCE: Final = 30.0
"""Words tesseract is less sure of are dropped (specks, widget edges read as ``|``)."""
LANGUAGE: Final = "eng"
TESSDATA_DIRS: Final = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)
"""Where distributions put tesseract's models (Debian and Ubuntu, then Fedora and Arch,
then a build from source); ``TESSDATA_PREFIX`` comes first."""
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


class OcrUnavailable(DisplaysUnavailable):
    """The host has no English model for tesseract; the message says what to install."""


def tessdata() -> Path:
    """The directory holding tesseract's English model: ``TESSDATA_PREFIX`` if set,
    else the first of the distributions' places that has it."""
    given = os.environ.get("TESSDATA_PREFIX")
    places = [Path(given)] if given else [Path(d) for d in TESSDATA_DIRS]
    for place in places:
        if (place / f"{LANGUAGE}.traineddata").is_file():
            return place
    where = f"TESSDATA_PREFIX={given}" if given else ", ".join(TESSDATA_DIRS)
    raise OcrUnavailable(
        f"OCR needs tesseract's English model ({LANGUAGE}.traineddata), found in none of "
        f"{where}: as root, apt-get install tesseract-ocr-eng, or set TESSDATA_PREFIX to "
        "the directory that holds it"
    )


class _Engines:
    """Tesseract engines lent to one read at a time: at most ``size`` exist, made when
    first needed and kept (loading the model is the expensive part of a read)."""

    def __init__(self, size: int) -> None:
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[PyTessBaseAPI] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def lend(self) -> Iterator[PyTessBaseAPI]:
        with self._slots:
            with self._lock:
                engine = self._idle.pop() if self._idle else None
            if engine is None:
                engine = _new_engine()
            try:
                yield engine
            finally:
                with self._lock:
                    self._idle.append(engine)


def _new_engine() -> PyTessBaseAPI:
    # One OpenMP thread a read: episodes read screens side by side, and tesseract's
    # threads spin for each other (15-20 % more CPU a read on two cores). Read when the
    # first engine starts; a value the user set is kept.
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    from tesserocr import PSM, PyTessBaseAPI

    # Sparse text: each label, field value and button read as a line of its own
    # (full-page segmentation joins a label and its field's value, and costs half as
    # much again).
    return PyTessBaseAPI(path=f"{tessdata()}/", lang=LANGUAGE, psm=PSM.SPARSE_TEXT)


@functools.cache
def _engines() -> _Engines:
    """This process's engines: one per core (a read is all CPU)."""
    return _Engines(os.cpu_count() or 1)


def _recognize(image: Image) -> list[dict[str, str]]:
    """Tesseract's words in ``image``: its TSV rows (level, block, paragraph and line
    numbers, box, confidence, text), as dicts."""
    with _engines().lend() as engine:
        engine.SetImage(image)
        tsv = engine.GetTSVText(0)
    fields = ("level", "page_num", "block_num", "par_num", "line_num", "word_num",
              "left", "top", "width", "height", "conf", "text")  # fmt: skip
    return [
        dict(zip(fields, row, strict=False))
        for row in csv.reader(tsv.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE)
        if len(row) == len(fields)
    ]


def read_text(frame: Frame, box: Box | None = None) -> Reading:
    """OCR ``frame`` (within ``box``, or within its content). Blocking (tesseract works
    for 50-150 ms): call it from a worker thread in async code."""
    from PIL import ImageOps

    started = time.perf_counter()
    area = box if box is not None else content_box(frame)
    if area is None or area.width == 0 or area.height == 0:
        return Reading((), time.perf_counter() - started, None)
    image = ImageOps.grayscale(frame.image(area))
    image = image.resize((image.width * SCALE, image.height * SCALE))
    lines: dict[tuple[str, str, str], list[Word]] = {}
    for row in _recognize(image):
        text, confidence = row["text"].strip(), float(row["conf"])
        if not text or confidence < MIN_CONFIDENCE:
            continue
        word_box = Box(
            area.x + int(row["left"]) // SCALE,
            area.y + int(row["top"]) // SCALE,
            max(1, int(row["width"]) // SCALE),
            max(1, int(row["height"]) // SCALE),
        )
        key = (row["block_num"], row["par_num"], row["line_num"])
        lines.setdefault(key, []).append(Word(text, word_box, confidence))
    ordered = sorted(lines.values(), key=lambda ws: (ws[0].box.y, ws[0].box.x))
    found = tuple(Line(tuple(sorted(ws, key=lambda w: w.box.x))) for ws in ordered)
    return Reading(found, time.perf_counter() - started, area)
