"""A scripted chat-completions endpoint on 127.0.0.1 for the llm arm's tests.

It speaks the OpenAI wire format (``POST /v1/chat/completions``) and plays back a
script chosen by the request's ``model``; the script reads only the request (the
conversation so far), so any number of episodes can talk to it at once. Usage is
counted deterministically from the request's size. Scripts solve MockMed's triage
task the way ``effect_verified`` does: read, submit, read back, and claim success
only when the readback shows the one new record with the payload's note.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

Reply = tuple[int, Mapping[str, str], Any]
Script = Callable[[Sequence[Mapping[str, Any]], "Endpoint"], Reply]

_PAYLOAD = re.compile(r"Payload \(JSON\): (\{.*\})")


def _turn(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


def _payload(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    for m in messages:
        found = _PAYLOAD.search(str(m.get("content") or "")) if m.get("role") == "user" else None
        if found:
            payload: dict[str, str] = orjson.loads(found.group(1))
            return payload
    raise AssertionError("no payload in the conversation")


def _tool_results(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [orjson.loads(m["content"]) for m in messages if m.get("role") == "tool"]


def call(name: str, args: Any, *, raw: str | None = None) -> dict[str, Any]:
    """An assistant message with one tool call (``raw`` overrides the arguments string)."""
    arguments = raw if raw is not None else orjson.dumps(args).decode()
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call-{name}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ],
    }


def _ok(message: Mapping[str, Any]) -> Reply:
    return 200, {}, message


def _verdict(before: Any, after: Any, note: str) -> tuple[bool, str]:
    """The scripted model's own effect check over two readbacks."""
    if not (before.get("readable") and after.get("readable")):
        return False, "the readback is unreadable"
    old = before["tables"]["encounters"]
    new = after["tables"]["encounters"]
    if any(row not in new for row in old):
        return False, "a record that was there before is gone"
    mine = [r for r in new if r not in old and r["patient_id"] == "p1" and r["type"] == "Triage"]
    if len(mine) != 1 or mine[0]["note"] != note:
        return False, f"readback shows {len(mine)} new triage record(s), not one with the note"
    return True, "the readback shows the triage encounter with the note"


def _submit(payload: Mapping[str, Any]) -> Reply:
    """Submit the payload's Triage encounter for patient p1."""
    fields = {"patient_id": "p1", "type": "Triage", "note": payload["note"]}
    fields["key"] = payload["record_key"]
    return _ok(call("submit_form", {"fields": fields}))


def solve(messages: Sequence[Mapping[str, Any]], skip: int = 0) -> Reply:
    """Read the form, read the records, submit, read again, report what the reads show.
    ``skip`` turns at the start belong to something else (e.g. malformed calls)."""
    turn = _turn(messages) - skip
    payload = _payload(messages)
    if turn == 0:
        return _ok(call("read_base_url", {}))
    if turn == 1:
        return _ok(call("read_records", {}))
    if turn == 2:
        return _submit(payload)
    if turn == 3:
        return _ok(call("read_records", {}))
    results = _tool_results(messages)
    success, why = _verdict(results[-3], results[-1], payload["note"])
    return _ok(call("finish", {"success": success, "message": why}))


def solver(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    return solve(messages)


def liar(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    """Claims success at once, having touched nothing."""
    return _ok(call("finish", {"success": True, "message": "saved the encounter"}))


def looper(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    """Reads the records forever."""
    return _ok(call("read_records", {}))


def fumbler(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    """Two malformed calls (bad JSON, an unknown tool), then, told of both, solves."""
    turn = _turn(messages)
    if turn == 0:
        return _ok(call("submit_form", None, raw='{"fields": {"note": '))
    if turn == 1:
        errors = [r.get("error", "") for r in _tool_results(messages)]
        assert errors and "not valid JSON" in errors[-1], errors
        return _ok(call("launch_rockets", {}))
    errors = [r.get("error", "") for r in _tool_results(messages)]
    assert "unknown tool 'launch_rockets'" in errors[1], errors
    return solve(messages, skip=2)


def garbage(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    """Only ever malformed arguments."""
    return _ok(call("read_records", None, raw="not json at all"))


def flaky(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    """429 (Retry-After: 7) on each conversation's first request, then solves."""
    key = str(_payload(messages))
    if _turn(messages) == 0 and key not in ep.throttled:
        ep.throttled.add(key)
        return 429, {"Retry-After": "7"}, {"error": {"message": "rate limited"}}
    return solve(messages)


def spender(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    """Submits the payload's encounter in its first answer, an answer that costs
    ``SPENDER_TOKENS`` output tokens (over any small budget), then reports success."""
    if _turn(messages) == 0:
        return _submit(_payload(messages))
    return _ok(call("finish", {"success": True, "message": "submitted"}))


SPENDER_TOKENS = 100_000


def dropout(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    """Answers one call (reads the records), then fails every request with a 500."""
    if _turn(messages) == 0:
        return _ok(call("read_records", {}))
    return storm(messages, ep)


def storm(messages: Sequence[Mapping[str, Any]], ep: Endpoint) -> Reply:
    return 500, {}, {"error": {"message": "upstream exploded"}}


SCRIPTS: dict[str, Script] = {
    "solver": solver,
    "solver-billed": solver,
    "liar": liar,
    "looper": looper,
    "fumbler": fumbler,
    "garbage": garbage,
    "flaky": flaky,
    "storm": storm,
    "spender": spender,
    "dropout": dropout,
}


class Endpoint:
    """The app plus what it saw: every request body, and which conversations it throttled."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.throttled: set[str] = set()
        self.app = Starlette(
            routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])]
        )

    async def _complete(self, request: Request) -> Response:
        if request.headers.get("authorization") != "Bearer test-key":
            return Response(b'{"error":"bad key"}', status_code=401)
        body = orjson.loads(await request.body())
        self.requests.append(body)
        model = body["model"]
        status, headers, content = SCRIPTS[model](body["messages"], self)
        if status == 200:
            usage: dict[str, Any] = {
                "prompt_tokens": len(orjson.dumps(body["messages"])) // 4,
                "completion_tokens": SPENDER_TOKENS if model == "spender" else 10,
            }
            if model.endswith("-billed"):
                usage["cost"] = 0.0025
            content = {
                "id": "cmpl",
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": content, "finish_reason": "tool_calls"}],
                "usage": usage,
            }
        return Response(
            orjson.dumps(content),
            status_code=status,
            headers=dict(headers),
            media_type="application/json",
        )
