"""The agent protocol's messages: line-delimited JSON over the agent's stdin and stdout.

The harness writes ``episode`` (and ``cancel``, and ``screenshot_result``) lines; the
agent writes ``report``, ``action``, ``model_call``, ``error`` and ``screenshot`` lines,
each naming its episode. docs/agent-protocol.md
is the prose; ``effectbench/schema/agent-protocol.schema.json`` the schema. The checks
here are hand-written (no JSON Schema library at run time) and a test holds them to
the schema.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, Final

import orjson

from effectbench.core import bounds
from effectbench.core.arm import TaskView
from effectbench.core.codec import converter
from effectbench.core.model import AgentReport, JSONScalar
from effectbench.core.provider import ModelCall, PageViewport

PROTOCOL_VERSION: Final = 1
AGENT_TYPES: Final = ("report", "action", "model_call", "error", "screenshot")
MAX_LABEL: Final = 200
"""Characters of a screenshot request's ``label`` (it goes into the log)."""
_SCALARS: Final = (str, int, float, bool, type(None))
_USAGE: Final = ("input_tokens", "output_tokens", "cost_usd", "latency_ms")


def episode_line(
    task: TaskView,
    channels: Mapping[str, str],
    timeout_s: float | None,
    cdp_url: str | None = None,
    viewport: PageViewport | None = None,
) -> bytes:
    """One ``episode`` message: the TaskView's fields, the channels and the deadline
    (``deadline`` in Unix seconds, ``timeout_s`` relative, both null without a limit);
    ``browser`` carries the episode's CDP endpoint when the agent asked for a browser
    (``cdp_url``, and ``http_url``: the same for clients that discover over HTTP) and
    the page's ``viewport``."""
    view = converter.unstructure(task)
    episode_id = view.pop("episode_id")
    message = {
        "type": "episode",
        "protocol": PROTOCOL_VERSION,
        "episode_id": episode_id,
        "task": view,
        "channels": dict(channels),
        "deadline": None if timeout_s is None else time.time() + timeout_s,
        "timeout_s": timeout_s,
    }
    if cdp_url is not None:
        browser: dict[str, Any] = {"cdp_url": cdp_url}
        if cdp_url.startswith("ws://"):  # the same endpoint for clients that want http://
            browser["http_url"] = "http://" + cdp_url.removeprefix("ws://")
        if viewport is not None:
            browser["viewport"] = {
                "width": viewport.width,
                "height": viewport.height,
                "device_scale_factor": viewport.device_scale_factor,
            }
        message["browser"] = browser
    return orjson.dumps(message) + b"\n"


def cancel_line(episode_id: str, reason: str) -> bytes:
    """Tell a long-lived agent to stop working on an episode the harness gave up on."""
    return orjson.dumps({"type": "cancel", "episode_id": episode_id, "reason": reason}) + b"\n"


def screenshot_result(episode_id: str, ident: str | int | None, answer: Mapping[str, Any]) -> bytes:
    """The harness's answer to a ``screenshot`` request: ``ok`` and the image's ``sha256``
    (or ``ok`` false and an ``error``), echoing the request's ``id`` when it gave one."""
    message: dict[str, Any] = {"type": "screenshot_result", "episode_id": episode_id}
    if ident is not None:
        message["id"] = ident
    message.update(answer)
    return orjson.dumps(message) + b"\n"


def _screenshot_problem(msg: Mapping[str, Any]) -> str | None:
    ident = msg.get("id")
    if ident is not None and (
        type(ident) not in (str, int) or (type(ident) is str and len(ident) > MAX_LABEL)
    ):
        return f"screenshot id must be a string of at most {MAX_LABEL} characters or an integer"
    label = msg.get("label", "")
    if not isinstance(label, str) or len(label) > MAX_LABEL:
        return f"screenshot label must be a string of at most {MAX_LABEL} characters"
    if type(msg.get("image", False)) is not bool:
        return f"screenshot image must be true or false, got {msg.get('image')!r}"
    extra = set(msg) - {"type", "episode_id", "id", "label", "image"}
    return f"screenshot has unknown fields {sorted(extra)}" if extra else None


def _usage_problem(msg: Mapping[str, Any]) -> str | None:
    for key in _USAGE:  # each number in its documented range (core/bounds.py)
        why = bounds.usage_problem(key, msg.get(key))
        if why is not None:
            return f"model_call {why}"
    model = msg.get("model")
    if model is not None and not isinstance(model, str):
        return f"model_call model must be a string or null, got {model!r}"
    extra = set(msg) - {"type", "episode_id", "model", *_USAGE}
    return f"model_call has unknown fields {sorted(extra)}" if extra else None


def _report_problem(msg: Mapping[str, Any]) -> str | None:
    for key in ("reported_success", "halted"):
        if type(msg.get(key)) is not bool:
            return f"report {key} must be true or false, got {msg.get(key)!r}"
    if not isinstance(msg.get("message", ""), str):
        return f"report message must be a string, got {type(msg.get('message')).__name__}"
    extra = set(msg) - {"type", "episode_id", "reported_success", "halted", "message"}
    return f"report has unknown fields {sorted(extra)}" if extra else None


def _action_problem(msg: Mapping[str, Any]) -> str | None:
    kind = msg.get("kind")
    if not isinstance(kind, str) or not kind:
        return f"action kind must be a non-empty string, got {kind!r}"
    detail = msg.get("detail", {})
    if not isinstance(detail, dict):
        return f"action detail must be an object, got {type(detail).__name__}"
    for key, value in detail.items():
        if not isinstance(value, _SCALARS) or (type(value) is float and not math.isfinite(value)):
            return f"action detail {key!r} must be a JSON scalar, got {type(value).__name__}"
    extra = set(msg) - {"type", "episode_id", "kind", "detail"}
    return f"action has unknown fields {sorted(extra)}" if extra else None


def _error_problem(msg: Mapping[str, Any]) -> str | None:
    if not isinstance(msg.get("message", ""), str):
        return f"error message must be a string, got {type(msg.get('message')).__name__}"
    extra = set(msg) - {"type", "episode_id", "message"}
    return f"error has unknown fields {sorted(extra)}" if extra else None


_CHECKS: Final = {
    "report": _report_problem,
    "action": _action_problem,
    "model_call": _usage_problem,
    "error": _error_problem,
    "screenshot": _screenshot_problem,
}


def problem(msg: Mapping[str, Any]) -> str | None:
    """Why an agent message (already known to be an object with an episode id) breaks
    the protocol, or None when it is well formed."""
    kind = msg.get("type")
    check = _CHECKS.get(kind) if isinstance(kind, str) else None
    if check is None:
        return f"unknown message type {kind!r} (expected one of {', '.join(AGENT_TYPES)})"
    return check(msg)


def to_report(msg: Mapping[str, Any]) -> AgentReport:
    return AgentReport(
        reported_success=msg["reported_success"],
        halted=msg["halted"],
        message=msg.get("message", ""),
    )


def to_model_call(msg: Mapping[str, Any]) -> ModelCall:
    """A cost the agent reports is the arm's own figure (``cost_source`` "arm")."""
    usage = {key: msg.get(key) for key in _USAGE}
    return ModelCall(
        **usage,
        cost_source=None if usage.get("cost_usd") is None else "arm",
        model=msg.get("model"),
    )


def action_detail(msg: Mapping[str, Any]) -> dict[str, JSONScalar]:
    detail: dict[str, JSONScalar] = dict(msg.get("detail") or {})
    return detail


__all__ = [
    "AGENT_TYPES",
    "MAX_LABEL",
    "PROTOCOL_VERSION",
    "action_detail",
    "cancel_line",
    "episode_line",
    "problem",
    "screenshot_result",
    "to_model_call",
    "to_report",
]
