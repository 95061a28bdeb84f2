"""The computer action space: what a computer-use model may ask the harness to do.

Every action is a frozen value, validated when built, so an action that reaches the
screen is always one the screen can perform. Coordinates are CSS pixels of the fixed
viewport, origin top left. ``parse_action`` builds one from a model's loosely typed
arguments and raises ``ActionError`` with a message meant for the model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, TypeAlias

import attrs

from effectbench.core.model import JSONScalar

__all__ = [
    "ACTION_NAMES",
    "Action",
    "ActionError",
    "Click",
    "Done",
    "DoubleClick",
    "Drag",
    "Key",
    "Move",
    "Screenshot",
    "Scroll",
    "Type",
    "Viewport",
    "Wait",
    "parse_action",
]

Button = Literal["left", "right", "middle"]
BUTTONS: Final = ("left", "right", "middle")
MAX_TEXT: Final = 4_000
"""Characters one ``type`` may send."""
MAX_WAIT_MS: Final = 10_000
MAX_SCROLL: Final = 10_000
_KEY: Final = re.compile(r"[A-Za-z0-9_]+|[^\s+]")


class ActionError(ValueError):
    """An action that cannot be performed as given; the message goes back to the model."""


@attrs.frozen
class Viewport:
    """The page's size in CSS pixels, fixed for a run."""

    width: int = attrs.field(default=1280)
    height: int = attrs.field(default=800)

    @width.validator
    @height.validator
    def _positive(self, attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not 200 <= value <= 4096:
            raise ValueError(f"viewport {attribute.name} must be 200..4096 pixels, not {value!r}")

    @classmethod
    def parse(cls, text: str) -> Viewport:
        """``WIDTHxHEIGHT``, e.g. ``1280x800``."""
        found = re.fullmatch(r"\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*", text)
        if found is None:
            raise ValueError(f"viewport {text!r} is not WIDTHxHEIGHT (e.g. 1280x800)")
        return cls(int(found.group(1)), int(found.group(2)))

    def __str__(self) -> str:
        return f"{self.width}x{self.height}"


def _coordinate(value: object, name: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or abs(value) > 1_000_000
    ):
        raise ActionError(f"{name} must be a number of pixels, not {value!r}")
    return round(value)


def _point(x: int, y: int, viewport: Viewport) -> None:
    if not (0 <= x < viewport.width and 0 <= y < viewport.height):
        raise ActionError(
            f"({x}, {y}) is outside the {viewport} screen: x 0..{viewport.width - 1}, "
            f"y 0..{viewport.height - 1}"
        )


@attrs.frozen
class Click:
    x: int
    y: int
    button: Button = "left"
    name: ClassVar[str] = "click"


@attrs.frozen
class DoubleClick:
    x: int
    y: int
    name: ClassVar[str] = "double_click"


@attrs.frozen
class Move:
    x: int
    y: int
    name: ClassVar[str] = "move"


@attrs.frozen
class Drag:
    x: int
    y: int
    to_x: int
    to_y: int
    name: ClassVar[str] = "drag"


@attrs.frozen
class Type:
    text: str
    name: ClassVar[str] = "type"


@attrs.frozen
class Key:
    """A key or a chord, in Playwright's spelling once normalised (``Control+a``)."""

    combo: str
    name: ClassVar[str] = "key"


@attrs.frozen
class Scroll:
    x: int
    y: int
    dx: int
    dy: int
    name: ClassVar[str] = "scroll"


@attrs.frozen
class Wait:
    ms: int
    name: ClassVar[str] = "wait"


@attrs.frozen
class Screenshot:
    name: ClassVar[str] = "screenshot"


@attrs.frozen
class Done:
    success: bool
    message: str = ""
    name: ClassVar[str] = "done"


Action: TypeAlias = (
    Click | DoubleClick | Move | Drag | Type | Key | Scroll | Wait | Screenshot | Done
)
ACTION_NAMES: Final = (
    "click", "double_click", "move", "drag", "type", "key", "scroll", "wait", "screenshot", "done"
)  # fmt: skip

_KEY_NAMES: Final[Mapping[str, str]] = {
    "ctrl": "Control", "control": "Control", "cmd": "Meta", "command": "Meta", "super": "Meta",
    "meta": "Meta", "win": "Meta", "alt": "Alt", "option": "Alt", "shift": "Shift",
    "enter": "Enter", "return": "Enter", "esc": "Escape", "escape": "Escape", "tab": "Tab",
    "space": "Space", "backspace": "Backspace", "delete": "Delete", "del": "Delete",
    "up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight",
    "arrowup": "ArrowUp", "arrowdown": "ArrowDown", "arrowleft": "ArrowLeft",
    "arrowright": "ArrowRight", "home": "Home", "end": "End", "pageup": "PageUp",
    "page_up": "PageUp", "pagedown": "PageDown", "page_down": "PageDown",
    "insert": "Insert",
}  # fmt: skip


def normalise_combo(combo: object) -> str:
    """``ctrl+a``, ``Return``, ``shift+Tab`` (xdotool-style, as models write them) in
    Playwright's spelling; ActionError when it names no key."""
    if not isinstance(combo, str) or not combo.strip() or len(combo) > 64:
        raise ActionError(f"key must be a key name or chord such as 'ctrl+a', not {combo!r}")
    parts = [p.strip() for p in combo.strip().split("+")] if combo.strip() != "+" else ["+"]
    out = []
    for part in parts:
        if not part or _KEY.fullmatch(part) is None:
            raise ActionError(f"key {combo!r} has an empty or unknown part {part!r}")
        low = part.lower()
        if low in _KEY_NAMES:
            out.append(_KEY_NAMES[low])
        elif re.fullmatch(r"f([1-9]|1[0-2])", low):
            out.append(low.upper())
        elif len(part) == 1:
            out.append(part)
        else:
            out.append(part[0].upper() + part[1:])
    return "+".join(out)


def _text(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ActionError(f"{name} must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise ActionError(f"{name} is {len(value)} characters; at most {limit}")
    return value


def _bounded(value: object, name: str, low: int, high: int) -> int:
    n = _coordinate(value, name)
    if not low <= n <= high:
        raise ActionError(f"{name} must be {low}..{high}, not {n}")
    return n


def parse_action(name: str, args: Mapping[str, Any], viewport: Viewport) -> Action:
    """One action from a tool call's name and arguments; ActionError when it does not fit."""
    if name in ("click", "double_click", "move", "scroll", "drag"):
        x, y = _coordinate(args.get("x"), "x"), _coordinate(args.get("y"), "y")
        _point(x, y, viewport)
        if name == "click":
            button = args.get("button", "left")
            if button not in BUTTONS:
                raise ActionError(f"button must be one of {', '.join(BUTTONS)}, not {button!r}")
            return Click(x, y, button)
        if name == "double_click":
            return DoubleClick(x, y)
        if name == "move":
            return Move(x, y)
        if name == "drag":
            tx, ty = _coordinate(args.get("to_x"), "to_x"), _coordinate(args.get("to_y"), "to_y")
            _point(tx, ty, viewport)
            return Drag(x, y, tx, ty)
        dx = _bounded(args.get("dx", 0), "dx", -MAX_SCROLL, MAX_SCROLL)
        dy = _bounded(args.get("dy", 0), "dy", -MAX_SCROLL, MAX_SCROLL)
        return Scroll(x, y, dx, dy)
    if name == "type":
        return Type(_text(args.get("text"), "text", MAX_TEXT))
    if name == "key":
        return Key(normalise_combo(args.get("combo", args.get("key"))))
    if name == "wait":
        return Wait(_bounded(args.get("ms", 1000), "ms", 0, MAX_WAIT_MS))
    if name == "screenshot":
        return Screenshot()
    if name == "done":
        success = args.get("success")
        if not isinstance(success, bool):
            raise ActionError("done needs success: true or false")
        return Done(success, _text(args.get("message", ""), "message", MAX_TEXT))
    raise ActionError(f"unknown action {name!r}; the actions are: {', '.join(ACTION_NAMES)}")


def describe(action: Action) -> dict[str, JSONScalar]:
    """The action's fields for the log (kind, coordinates, text), its name excluded."""
    return {f.name: getattr(action, f.name) for f in attrs.fields(type(action))}
