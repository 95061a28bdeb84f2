"""The Anthropic Messages API's computer tool (``computer_20250124``).

``POST <base_url>/messages`` with the ``computer`` tool sized to the viewport and a
custom ``done`` tool (the computer tool has no report action). The model answers with
``tool_use`` blocks; each gets a ``tool_result`` in the next user message, the last of
them carrying the screenshot the turn's actions led to as an ``image`` block
(base64 PNG). The computer tool's action names map onto the action space: ``left_click``,
``right_click``, ``middle_click`` (``coordinate``), ``double_click``, ``mouse_move``,
``left_click_drag`` (``start_coordinate`` to ``coordinate``), ``type``, ``key``
(``text``), ``scroll`` (``scroll_direction``, ``scroll_amount`` in wheel notches of
``SCROLL_NOTCH`` pixels), ``wait`` (``duration`` in seconds) and ``screenshot``; the
others (``triple_click``, ``hold_key``, ``cursor_position``, ``left_mouse_down``/``up``)
go back to the model as unsupported.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Final

import aiohttp
import anyio
import orjson

from effectbench.arms.computer_use.actions import Viewport
from effectbench.arms.computer_use.turns import Call, Result, Turn
from effectbench.arms.llm.client import (
    ModelEndpointError,
    RetryPolicy,
    Sleep,
    post_with_retries,
    usage_call,
)
from effectbench.core.prices import PriceTable
from effectbench.core.provider import ModelCall, Telemetry

__all__ = ["AnthropicWire", "MessagesClient", "to_action"]

TOOL_TYPE: Final = "computer_20250124"
BETA: Final = "computer-use-2025-01-24"
API_VERSION: Final = "2023-06-01"
SCROLL_NOTCH: Final = 100
MAX_TOKENS: Final = 4096
OMITTED: Final = "(an earlier screenshot, omitted)"
_CLICKS: Final = {"left_click": "left", "right_click": "right", "middle_click": "middle"}
_SCROLL: Final = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


class MessagesClient:
    """Messages API calls for one episode; retries and usage as the llm arm's client."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        prices: PriceTable | None,
        telemetry: Telemetry,
        retry: RetryPolicy,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self._session = session
        self._url = base_url.rstrip("/") + "/messages"
        self.model = model
        self._headers = {
            "content-type": "application/json",
            "anthropic-version": API_VERSION,
            "anthropic-beta": BETA,
        }
        if api_key:
            self._headers["x-api-key"] = api_key
        self._prices = prices
        self._telemetry = telemetry
        self._retry = retry
        self._sleep = sleep

    async def create(self, request: Mapping[str, Any]) -> tuple[Mapping[str, Any], ModelCall]:
        body = orjson.dumps({"model": self.model, **request})
        payload, latency_ms = await post_with_retries(
            self._session, self._url, self._headers, body, self._retry, self._telemetry,
            self._sleep,
        )  # fmt: skip
        try:
            doc = orjson.loads(payload)
            if not isinstance(doc, dict) or not isinstance(doc.get("content"), list):
                raise TypeError("no content list")
        except (orjson.JSONDecodeError, TypeError) as exc:
            raise ModelEndpointError(
                f"model endpoint's answer is not a Messages response ({type(exc).__name__}: {exc})"
            ) from None
        raw_usage = doc.get("usage")
        usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        call = usage_call(
            usage, "input_tokens", "output_tokens", self.model, self._prices, latency_ms
        )
        self._telemetry.model_call(call)
        return doc, call


def _xy(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{name} must be [x, y]")
    return {"x": value[0], "y": value[1]}


def to_action(args: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """A computer tool input as an action of the action space (name, arguments);
    ValueError (told to the model) for what the action space does not do."""
    kind = args.get("action")
    if kind in _CLICKS:
        return "click", {**_xy(args.get("coordinate"), "coordinate"), "button": _CLICKS[kind]}
    if kind == "double_click":
        return "double_click", _xy(args.get("coordinate"), "coordinate")
    if kind == "mouse_move":
        return "move", _xy(args.get("coordinate"), "coordinate")
    if kind == "left_click_drag":
        start = _xy(args.get("start_coordinate"), "start_coordinate")
        end = _xy(args.get("coordinate"), "coordinate")
        return "drag", {**start, "to_x": end["x"], "to_y": end["y"]}
    if kind == "type":
        return "type", {"text": args.get("text")}
    if kind == "key":
        return "key", {"combo": args.get("text")}
    if kind == "scroll":
        direction = _SCROLL.get(str(args.get("scroll_direction")))
        amount = args.get("scroll_amount", 1)
        if direction is None or not isinstance(amount, int) or isinstance(amount, bool):
            raise ValueError("scroll needs scroll_direction up/down/left/right, scroll_amount")
        at = _xy(args.get("coordinate"), "coordinate")
        dx, dy = direction[0] * amount * SCROLL_NOTCH, direction[1] * amount * SCROLL_NOTCH
        return "scroll", {**at, "dx": dx, "dy": dy}
    if kind == "wait":
        duration = args.get("duration", 1)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)):
            raise ValueError("wait needs duration in seconds")
        return "wait", {"ms": round(duration * 1000)}
    if kind == "screenshot":
        return "screenshot", {}
    raise ValueError(f"the computer action {kind!r} is not supported here")


def _image(png: bytes) -> dict[str, Any]:
    data = base64.b64encode(png).decode("ascii")
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def _call(block: Mapping[str, Any]) -> Call:
    cid, name, args = str(block.get("id", "")), block.get("name"), block.get("input")
    if not isinstance(args, dict):
        return Call(cid, str(name), None, "input must be an object")
    if name == "done":
        return Call(cid, "done", args)
    if name != "computer":
        return Call(cid, str(name), None, f"unknown tool {name!r}; the tools are computer, done")
    try:
        action, mapped = to_action(args)
    except ValueError as exc:
        return Call(cid, str(args.get("action")), None, str(exc))
    return Call(cid, action, mapped)


class AnthropicWire:
    """One episode's Messages conversation."""

    def __init__(self, client: MessagesClient, viewport: Viewport, keep_screenshots: int = 3):
        self._client = client
        self._keep = max(1, keep_screenshots)
        self._tools = [
            {
                "type": TOOL_TYPE,
                "name": "computer",
                "display_width_px": viewport.width,
                "display_height_px": viewport.height,
            },
            {
                "name": "done",
                "description": "End the task: success true only when the task's effect is "
                "really done; false (a halt) when it is not or cannot be done safely.",
                "input_schema": {
                    "type": "object",
                    "properties": {"success": {"type": "boolean"}, "message": {"type": "string"}},
                    "required": ["success"],
                },
            },
        ]
        self.system = ""
        self.messages: list[dict[str, Any]] = []
        self._images: list[list[dict[str, Any]]] = []
        """The content lists that hold an image, oldest first."""

    def _with_image(self, content: list[dict[str, Any]], png: bytes) -> list[dict[str, Any]]:
        content.append(_image(png))
        self._images.append(content)
        while len(self._images) > self._keep:
            old = self._images.pop(0)
            old[:] = [
                {"type": "text", "text": OMITTED} if b.get("type") == "image" else b for b in old
            ]
        return content

    def begin(self, system: str, prompt: str, png: bytes) -> None:
        self.system = system
        content = self._with_image([{"type": "text", "text": f"{prompt}\nThe screen now:"}], png)
        self.messages = [{"role": "user", "content": content}]

    async def ask(self) -> Turn:
        doc, call = await self._client.create(
            {
                "max_tokens": MAX_TOKENS,
                "system": self.system,
                "tools": self._tools,
                "messages": self.messages,
            }
        )
        blocks = [b for b in doc["content"] if isinstance(b, dict)]
        self.messages.append({"role": "assistant", "content": blocks})
        text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        calls = tuple(_call(b) for b in blocks if b.get("type") == "tool_use")
        tokens = (call.input_tokens or 0) + (call.output_tokens or 0)
        return Turn(calls, text, tokens)

    def reply(self, results: Sequence[Result], png: bytes | None) -> None:
        content: list[dict[str, Any]] = []
        for i, r in enumerate(results):
            inner: list[dict[str, Any]] = [
                {"type": "text", "text": "ok" if r.error is None else r.error}
            ]
            if png is not None and i == len(results) - 1:
                inner = self._with_image(inner, png)
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.call.id}
            block["content"] = inner
            if r.error is not None:
                block["is_error"] = True
            content.append(block)
        if not content and png is not None:
            content = self._with_image([{"type": "text", "text": "The screen now:"}], png)
        self.messages.append({"role": "user", "content": content})
