"""An episode replayed: its screenshots in order, each with the actions taken on it.

A frame is one screenshot the log cites, and the actions that followed it until the
next one. An action that names the screenshot it was chosen from (the computer-use
arm's ``screenshot`` or ``seen``: its sha256) goes to that screenshot's frame instead;
one citing an image the run did not keep (``--screenshots final``) gets a frame of its
own that says so. Points (click, drag, scroll, any action with numeric ``x`` and ``y``)
are drawn in the screenshot's own pixels; text and keys are captions. Only the attempt
that was scored is replayed (the events after the last ``episode.planned``).

``screenshot_image`` is the one hook that turns a blob under the run directory into an
image: every frame's picture goes through it, so a blob that is missing, outside the
run directory or not the one its hash names is a note on its frame, never a picture.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

__all__ = [
    "SCREENSHOT_BUDGET",
    "Filmstrip",
    "Frame",
    "FrameAction",
    "Mark",
    "Screenshot",
    "ShotBudget",
    "filmstrip",
    "screenshot_image",
    "screenshot_refs",
]

SCREENSHOT_BUDGET: Final = 4_000_000
"""Bytes of screenshots one report embeds; later ones are listed by path only."""
SCREENSHOT_EVENT: Final = "episode.screenshot"
_IMAGE_TYPES: Final = {
    b"\x89PNG": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF8": "image/gif",
    b"RIFF": "image/webp",
}
_HEX: Final = re.compile(r"[0-9a-f]{64}")
_POINTED: Final = ("click", "double_click", "move", "drag", "scroll")
_HIDDEN: Final = frozenset({"action", "screenshot", "seen"})
"""Detail keys a caption leaves out: the action's name and the image it cites."""


# --------------------------------------------------------------------------- images


@attrs.frozen
class Screenshot:
    """One image as the report shows it: embedded (``data_uri``), or why not (``note``).
    ``width``/``height``: its pixels, when embedded and readable from its header."""

    path: str
    data_uri: str | None
    note: str | None
    width: int | None = None
    height: int | None = None


def _size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG or GIF header, or None."""
    if data.startswith(b"\x89PNG") and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    if data.startswith(b"GIF8") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    return None


def screenshot_image(run_dir: Path, blob_path: str, sha256: str | None = None) -> Screenshot:
    """THE screenshot hook: an image for ``blob_path`` (relative to the run directory).

    A content-hashed blob is checked against ``sha256`` (or, failing that, the hex in
    its file name); the image is embedded as a data URI so the report stays one file.
    A missing, outside, mismatching or non-image blob gives a note instead of an image."""
    root = run_dir.resolve()
    path = (root / blob_path).resolve()
    if root != path and root not in path.parents:
        return Screenshot(blob_path, None, "outside the run directory; not shown")
    try:
        data = path.read_bytes()
    except OSError:
        return Screenshot(blob_path, None, "blob not found in the run directory")
    digest = hashlib.sha256(data).hexdigest()
    claimed = sha256 or (path.stem if len(path.stem) == 64 else None)
    if claimed is not None and claimed.lower() != digest:
        return Screenshot(blob_path, None, "blob does not match its content hash; not shown")
    mime = next((m for magic, m in _IMAGE_TYPES.items() if data.startswith(magic)), None)
    if mime is None:
        return Screenshot(blob_path, None, "not a PNG, JPEG, GIF or WebP image")
    w, h = _size(data) or (None, None)
    uri = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    return Screenshot(blob_path, uri, None, w, h)


def screenshot_refs(ev: Any) -> list[tuple[str, str | None]]:
    """(blob path, sha256 or None) of every image an event cites: an
    ``episode.screenshot`` event's ``path`` (or ``blob``), or a ``screenshot`` key of any
    event's data (a path, or an object with ``path``/``blob`` and ``sha256``)."""
    data = ev.data if isinstance(ev.data, Mapping) else {}
    refs: list[tuple[str, str | None]] = []
    shot = data.get("screenshot")
    if isinstance(shot, str):
        refs.append((shot, None))
    elif isinstance(shot, Mapping) and isinstance(shot.get("path") or shot.get("blob"), str):
        refs.append((str(shot.get("path") or shot.get("blob")), _sha(shot.get("sha256"))))
    if ev.type == SCREENSHOT_EVENT and isinstance(data.get("path") or data.get("blob"), str):
        refs.append((str(data.get("path") or data.get("blob")), _sha(data.get("sha256"))))
    return refs


def _sha(value: object) -> str | None:
    return value if isinstance(value, str) else None


class ShotBudget:
    """Screenshot bytes left for this report."""

    def __init__(self, limit: int = SCREENSHOT_BUDGET) -> None:
        self.left = limit

    def take(self, shot: Screenshot) -> Screenshot:
        if shot.data_uri is None:
            return shot
        if len(shot.data_uri) > self.left:
            return Screenshot(shot.path, None, "not embedded (report size budget); open the blob")
        self.left -= len(shot.data_uri)
        return shot


# --------------------------------------------------------------------------- frames


@attrs.frozen
class Mark:
    """Where an action pointed, in the screenshot's pixels; ``n`` is drawn beside it."""

    n: int
    kind: str
    x: int
    y: int
    to_x: int | None = None
    to_y: int | None = None


@attrs.frozen
class FrameAction:
    """One logged action on a frame: its caption and, for a pointing one, its mark."""

    n: int
    seq: int
    kind: str
    text: str
    mark: Mark | None


@attrs.frozen
class Frame:
    """One screenshot and the actions taken on it. ``seq`` None: no event logged it."""

    index: int
    seq: int | None
    label: str
    sha256: str | None
    shot: Screenshot
    actions: tuple[FrameAction, ...]

    @property
    def marks(self) -> tuple[Mark, ...]:
        return tuple(a.mark for a in self.actions if a.mark is not None)

    @property
    def radius(self) -> int:
        """A mark's radius in the image's pixels (about 1% of its larger side)."""
        return max(6, max(self.shot.width or 0, self.shot.height or 0) // 90)


@attrs.frozen
class Filmstrip:
    frames: tuple[Frame, ...]
    before: tuple[FrameAction, ...]
    """Actions logged before the first screenshot (e.g. the computer-use viewport)."""


@attrs.define
class _Open:
    seq: int | None
    label: str
    sha256: str | None
    shot: Screenshot
    actions: list[FrameAction] = attrs.field(factory=list)


def filmstrip(events: Iterable[Any], run_dir: Path, budget: ShotBudget) -> Filmstrip | None:
    """The scored attempt's frames, or None when it logged no screenshot."""
    evs = list(events)
    start = max((i for i, ev in enumerate(evs) if ev.type == "episode.planned"), default=0)
    frames: list[_Open] = []
    before: list[FrameAction] = []
    for ev in evs[start:]:
        for path, sha in screenshot_refs(ev):
            label = ev.data.get("label") if ev.type == SCREENSHOT_EVENT else ev.type
            shot = budget.take(screenshot_image(run_dir, path, sha))
            frames.append(_Open(ev.seq, str(label or ""), sha, shot))
        if ev.type == "episode.action" and isinstance(ev.data, Mapping):
            _place(ev, frames, before)
    if not any(f.seq is not None for f in frames):
        return None
    return Filmstrip(
        tuple(
            Frame(i, f.seq, f.label, f.sha256, f.shot, tuple(f.actions))
            for i, f in enumerate(frames, 1)
        ),
        tuple(before),
    )


def _place(ev: Any, frames: list[_Open], before: list[FrameAction]) -> None:
    """Put an action on the frame it cites, else on the latest frame."""
    detail = ev.data.get("detail")
    detail = detail if isinstance(detail, Mapping) else {}
    cited = next((v for v in (detail.get("screenshot"), detail.get("seen")) if _is_hex(v)), None)
    target: _Open | None = frames[-1] if frames else None
    if cited is not None:
        target = next((f for f in reversed(frames) if f.sha256 == cited), None)
        if target is None:
            note = f"sha256 {cited[:12]}... was not kept in this run (--screenshots)"
            target = _Open(None, "not kept", cited, Screenshot("", None, note))
            frames.append(target)
    into = before if target is None else target.actions
    into.append(_action(len(into) + 1, ev.seq, str(ev.data.get("kind") or ""), detail))


def _is_hex(value: object) -> bool:
    return isinstance(value, str) and _HEX.fullmatch(value) is not None


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(value) if abs(value) < 1e9 else None


def _action(n: int, seq: int, kind: str, detail: Mapping[str, Any]) -> FrameAction:
    name = str(detail.get("action")) if kind == "computer" and "action" in detail else kind
    x, y = _int(detail.get("x")), _int(detail.get("y"))
    mark = None
    if x is not None and y is not None and detail.get("ok") is not False:
        to_x, to_y = _int(detail.get("to_x")), _int(detail.get("to_y"))
        drag = to_x is not None and to_y is not None
        kind_drawn = name if name in _POINTED else "point"
        mark = Mark(n, kind_drawn, x, y, to_x if drag else None, to_y if drag else None)
    return FrameAction(n, seq, name, _caption(name, detail), mark)


_SHOWN: Final[Mapping[str, frozenset[str]]] = {
    "click": frozenset({"x", "y", "button"}),
    "double_click": frozenset({"x", "y"}),
    "move": frozenset({"x", "y"}),
    "drag": frozenset({"x", "y", "to_x", "to_y"}),
    "scroll": frozenset({"x", "y", "dx", "dy"}),
    "type": frozenset({"text"}),
    "key": frozenset({"combo", "key"}),
}
"""Detail keys each action's own caption says; any other key is listed after it."""


def _caption(name: str, d: Mapping[str, Any]) -> str:
    """One line for an action: where it pointed, what it typed, which keys."""
    if d.get("ok") is False:
        return f"{name}: malformed, refused"
    rest = [f"{k} {_text(v)}" for k, v in d.items() if k not in _HIDDEN | _SHOWN.get(name, set())]
    if name not in _SHOWN:
        return name + (": " + ", ".join(rest) if rest else "")
    return "; ".join([_said(name, d), *rest])


def _said(name: str, d: Mapping[str, Any]) -> str:
    at = f"({_text(d.get('x'))}, {_text(d.get('y'))})"
    if name == "drag":
        return f"drag from {at} to ({_text(d.get('to_x'))}, {_text(d.get('to_y'))})"
    if name == "scroll":
        return f"scroll at {at} by ({_text(d.get('dx'))}, {_text(d.get('dy'))})"
    if name == "type":
        return f"type \u201c{_text(d.get('text'), 300)}\u201d"
    if name == "key":
        return f"key {_text(d.get('combo', d.get('key')))}"
    button = d.get("button")
    return f"{name} at {at}" + (f" ({button} button)" if button not in (None, "left") else "")


def _text(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
