"""The OpenAI-compatible chat-completions format: image parts and function tools.

Each action of the computer action space is a function tool. A screenshot goes to the
model as an ``image_url`` part (a ``data:image/png;base64`` URL) of a user message,
since a ``tool`` message carries text only: after a turn, every tool call gets its
``tool`` result and then one user message carries the screenshot the actions led to.
Only the last ``keep_screenshots`` images stay in the history; older ones become a
short text, so a long episode's requests do not grow without bound.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from effectbench.arms.computer_use.actions import MAX_TEXT, MAX_WAIT_MS, Viewport
from effectbench.arms.computer_use.turns import Call, Result, Turn
from effectbench.arms.llm.client import ChatClient

__all__ = ["OpenAiWire", "tool_specs"]

OMITTED: Final = "(an earlier screenshot, omitted)"
_XY: Final = {"x": {"type": "integer"}, "y": {"type": "integer"}}


def _fn(name: str, description: str, props: Mapping[str, Any], required: Sequence[str]) -> Any:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": dict(props),
                "required": list(required),
                "additionalProperties": False,
            },
        },
    }


def tool_specs(viewport: Viewport) -> list[Any]:
    """The action space as function tools, coordinates in the screen's pixels."""
    size = f"the screen is {viewport.width}x{viewport.height} pixels, origin top left"
    button = {"type": "string", "enum": ["left", "right", "middle"]}
    return [
        _fn("click", f"Click at (x, y); {size}.", {**_XY, "button": button}, ["x", "y"]),
        _fn("double_click", "Double-click at (x, y).", _XY, ["x", "y"]),
        _fn("move", "Move the pointer to (x, y).", _XY, ["x", "y"]),
        _fn(
            "drag",
            "Press at (x, y), move to (to_x, to_y), release.",
            {**_XY, "to_x": {"type": "integer"}, "to_y": {"type": "integer"}},
            ["x", "y", "to_x", "to_y"],
        ),
        _fn(
            "type",
            f"Type text at the focus (at most {MAX_TEXT} characters).",
            {"text": {"type": "string"}},
            ["text"],
        ),
        _fn(
            "key",
            "Press a key or chord, e.g. 'Enter', 'Tab', 'ctrl+a'.",
            {"combo": {"type": "string"}},
            ["combo"],
        ),
        _fn(
            "scroll",
            "Scroll by (dx, dy) pixels with the pointer at (x, y).",
            {**_XY, "dx": {"type": "integer"}, "dy": {"type": "integer"}},
            ["x", "y", "dx", "dy"],
        ),
        _fn(
            "wait",
            f"Wait ms milliseconds (at most {MAX_WAIT_MS}).",
            {"ms": {"type": "integer"}},
            ["ms"],
        ),
        _fn("screenshot", "Look at the screen again (no action).", {}, []),
        _fn(
            "done",
            "End the task: success true only when the task's effect is really done; "
            "false (a halt) when it is not or cannot be done safely.",
            {"success": {"type": "boolean"}, "message": {"type": "string"}},
            ["success"],
        ),
    ]


def _image(png: bytes) -> dict[str, Any]:
    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}


def _call(raw: object, index: int) -> Call:
    if not isinstance(raw, dict):
        return Call(f"call-{index}", "?", None, "a tool call must be an object")
    cid = str(raw.get("id") or f"call-{index}")
    function = raw.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return Call(cid, "?", None, "a tool call must name its function")
    name, arguments = function["name"], function.get("arguments")
    if isinstance(arguments, dict):
        return Call(cid, name, arguments)
    if not isinstance(arguments, str):
        return Call(cid, name, None, "arguments must be a JSON object encoded as a string")
    try:
        parsed = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError as exc:
        return Call(cid, name, None, f"arguments are not valid JSON: {exc}")
    if not isinstance(parsed, dict):
        return Call(cid, name, None, "arguments must be a JSON object")
    return Call(cid, name, parsed)


class OpenAiWire:
    """One episode's chat-completions conversation."""

    def __init__(self, client: ChatClient, viewport: Viewport, keep_screenshots: int = 3) -> None:
        self._client = client
        self._tools = tool_specs(viewport)
        self._keep = max(1, keep_screenshots)
        self.messages: list[dict[str, Any]] = []
        self._images: list[dict[str, Any]] = []
        """The user messages that carry an image, oldest first."""

    def _screenshot_message(self, text: str, png: bytes) -> dict[str, Any]:
        message = {"role": "user", "content": [{"type": "text", "text": text}, _image(png)]}
        self._images.append(message)
        while len(self._images) > self._keep:
            old = self._images.pop(0)
            old["content"] = [old["content"][0], {"type": "text", "text": OMITTED}]
        return message

    def begin(self, system: str, prompt: str, png: bytes) -> None:
        self.messages = [
            {"role": "system", "content": system},
            self._screenshot_message(f"{prompt}\nThe screen now:", png),
        ]

    async def ask(self) -> Turn:
        completion = await self._client.complete(self.messages, self._tools)
        message = completion.message
        raw_calls = message.get("tool_calls") or []
        calls = raw_calls if isinstance(raw_calls, list) else []
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        self.messages.append(
            {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}
        )
        parsed = tuple(_call(c, i) for i, c in enumerate(calls))
        return Turn(parsed, text, completion.total_tokens)

    def reply(self, results: Sequence[Result], png: bytes | None) -> None:
        for r in results:
            body = {"ok": True} if r.error is None else {"error": r.error}
            self.messages.append(
                {"role": "tool", "tool_call_id": r.call.id, "content": orjson.dumps(body).decode()}
            )
        if png is not None:
            self.messages.append(self._screenshot_message("The screen after your actions:", png))
