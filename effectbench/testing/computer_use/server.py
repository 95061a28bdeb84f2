"""The stand-in's HTTP server: the wire formats around the scripts.

``POST /v1/chat/completions`` answers in the OpenAI chat-completions shape (function
tool calls); ``POST /v1/messages`` in the Anthropic Messages shape (``tool_use`` blocks
of the ``computer`` tool). The model name picks the script (``scripts.SCRIPTS``); a
screenshot the sight has no layout for (a remote display's framebuffer: no page) goes,
when the sight reads pixels (``Sight(pixels=True)``), to the model's script over pixels
(``remote.REMOTE_SCRIPTS``), run in a worker thread since it reads the image with OCR; a
``flaky-`` prefix answers each conversation's first request with 429 and
``Retry-After: 7``; a ``-billed`` suffix reports a cost in the usage. Usage is counted
deterministically: a quarter of the text's characters plus ``IMAGE_TOKENS`` per image.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anyio.to_thread
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from effectbench.testing.computer_use.remote import REMOTE_SCRIPTS
from effectbench.testing.computer_use.scripts import SCRIPTS, Answer, Script
from effectbench.testing.computer_use.sight import Sight

__all__ = ["IMAGE_TOKENS", "StandIn"]

IMAGE_TOKENS: Final = 1_000
OUTPUT_TOKENS: Final = 20
_DATA_URL: Final = "data:image/png;base64,"


def _json(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(body), status_code=status, headers=dict(headers or {}),
        media_type="application/json",
    )  # fmt: skip


def _note(text: object) -> Mapping[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        note = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return note if isinstance(note, dict) else None


class StandIn:
    """The app, the sight it reads screenshots with, and what it saw (for tests)."""

    def __init__(self, sight: Sight) -> None:
        self.sight = sight
        self.requests: list[dict[str, Any]] = []
        self.throttled: set[str] = set()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
            ]
        )

    @staticmethod
    def _name(model: str) -> str:
        return model.removeprefix("flaky-").removesuffix("-billed")

    def _script(self, model: str) -> Script | None:
        return SCRIPTS.get(self._name(model))

    def _throttle(self, model: str, prompt: str, turn: int) -> Response | None:
        if model.startswith("flaky-") and turn == 0 and prompt not in self.throttled:
            self.throttled.add(prompt)
            return _json(429, {"error": {"message": "rate limited"}}, {"Retry-After": "7"})
        return None

    async def _decide(
        self, script: Script, model: str, prompt: str, notes: Sequence[Any],
        images: Sequence[bytes],
    ) -> Answer:  # fmt: skip
        """The script's answer to the latest screenshot: from the layout the sight
        recorded with it, else (no page) from its pixels when the sight reads them."""
        said = [n for n in notes if n is not None]
        view = self.sight.see(images[-1]) if images else None
        on_pixels = REMOTE_SCRIPTS.get(self._name(model)) if self.sight.pixels else None
        if view is None and images and on_pixels is not None:
            return await anyio.to_thread.run_sync(on_pixels, prompt, said, tuple(images))
        return script(prompt, said, view)

    async def _openai(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        script = self._script(str(body.get("model")))
        if script is None:
            return _json(404, {"error": {"message": f"no model {body.get('model')!r}"}})
        messages: list[dict[str, Any]] = body["messages"]
        texts: list[str] = []
        images: list[bytes] = []
        for m in messages:
            content = m.get("content")
            parts: list[dict[str, Any]] = (
                content if isinstance(content, list) else [{"type": "text", "text": content}]
            )
            for part in parts:
                if part.get("type") == "text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") == "image_url":
                    url = str(part["image_url"]["url"])
                    images.append(base64.b64decode(url.removeprefix(_DATA_URL)))
        prompt = next((m["content"][0]["text"] for m in messages if m.get("role") == "user"), "")
        notes = [_note(m.get("content")) for m in messages if m.get("role") == "assistant"]
        refused = self._throttle(str(body["model"]), prompt, len(notes))
        if refused is not None:
            return refused
        answer = await self._decide(script, str(body["model"]), prompt, notes, images)
        calls = [
            {
                "id": f"call-{len(notes)}-{i}",
                "type": "function",
                "function": {"name": name, "arguments": orjson.dumps(args).decode()},
            }
            for i, (name, args) in enumerate(answer.actions)
        ]
        usage: dict[str, Any] = {
            "prompt_tokens": sum(len(t) for t in texts) // 4 + IMAGE_TOKENS * len(images),
            "completion_tokens": OUTPUT_TOKENS,
        }
        if str(body["model"]).endswith("-billed"):
            usage["cost"] = 0.004
        note = orjson.dumps(answer.note).decode()
        message = {"role": "assistant", "content": note, "tool_calls": calls}
        return _json(
            200,
            {
                "id": "standin",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": usage,
            },
        )

    async def _anthropic(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        script = self._script(str(body.get("model")))
        if script is None:
            return _json(404, {"error": {"type": "not_found_error", "message": "no model"}})
        messages: list[dict[str, Any]] = body["messages"]
        texts: list[str] = [str(body.get("system", ""))]
        images: list[bytes] = []

        def walk(blocks: Sequence[Any]) -> None:
            for b in blocks:
                if b.get("type") == "text":
                    texts.append(str(b.get("text", "")))
                elif b.get("type") == "image":
                    images.append(base64.b64decode(b["source"]["data"]))
                elif b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                    walk(b["content"])

        for m in messages:
            if m.get("role") == "user":
                walk(m["content"])
        prompt = str(messages[0]["content"][0]["text"])
        notes = [
            _note(next((b.get("text") for b in m["content"] if b.get("type") == "text"), None))
            for m in messages
            if m.get("role") == "assistant"
        ]
        refused = self._throttle(str(body["model"]), prompt, len(notes))
        if refused is not None:
            return refused
        answer = await self._decide(script, str(body["model"]), prompt, notes, images)
        content: list[dict[str, Any]] = [
            {"type": "text", "text": orjson.dumps(answer.note).decode()}
        ]
        for i, (name, args) in enumerate(answer.actions):
            tool, data = (
                ("done", dict(args)) if name == "done" else ("computer", _computer(name, args))
            )
            content.append(
                {"type": "tool_use", "id": f"toolu_{len(notes)}_{i}", "name": tool, "input": data}
            )
        usage: dict[str, Any] = {
            "input_tokens": sum(len(t) for t in texts) // 4 + IMAGE_TOKENS * len(images),
            "output_tokens": OUTPUT_TOKENS,
        }
        return _json(
            200,
            {
                "id": "msg_standin",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "tool_use",
                "usage": usage,
            },
        )


def _computer(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """One of the scripts' actions as the computer tool's input."""
    if name == "click":
        return {"action": "left_click", "coordinate": [args["x"], args["y"]]}
    if name == "key":
        return {"action": "key", "text": args["combo"]}
    if name == "type":
        return {"action": "type", "text": args["text"]}
    if name == "wait":
        return {"action": "wait", "duration": args["ms"] / 1000}
    raise ValueError(f"the stand-in has no computer tool spelling for {name!r}")
