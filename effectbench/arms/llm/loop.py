"""The tool-calling loop of one episode, under a hard budget.

Ask the model; run every tool call it makes and feed the results back; stop when it
calls ``finish`` (its report), answers without a tool call (a halt: it never said it
succeeded), spends its budget of calls or tokens, or makes too many malformed tool
calls. Malformed calls (arguments that are not a JSON object, an unknown tool,
arguments a tool rejects) go back to the model as an error result and are counted.
The token budget is checked as each answer arrives, before its tool calls run: the
answer that crosses it acts on nothing (not even a ``finish``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs
import orjson

from effectbench.arms.llm.client import ChatClient
from effectbench.arms.llm.tools import FINISH, Tool, ToolError, encode_result
from effectbench.core.arm import TaskView
from effectbench.core.model import AgentReport
from effectbench.core.provider import Telemetry

__all__ = ["Budget", "run_loop", "system_prompt", "user_prompt"]

SYSTEM: Final = (
    "You operate a business application through tools on behalf of a user. Inspect the "
    "product, act, and check that what you did is really saved before you report. Call "
    "the 'finish' tool exactly once at the end: success true only when the task's effect "
    "is really in the record; success false when it is not or cannot be done safely."
)


@attrs.frozen
class Budget:
    """Hard limits for one episode. ``max_calls`` counts model calls; ``max_tokens``
    input plus output tokens over all calls; ``max_bad_tool_calls`` malformed calls."""

    max_calls: int = 16
    max_tokens: int = 200_000
    max_bad_tool_calls: int = 3


def system_prompt() -> str:
    return SYSTEM


def user_prompt(task: TaskView) -> str:
    """The task as the model sees it: the goal and this trial's payload, never the script."""
    params = orjson.dumps(dict(task.params), option=orjson.OPT_SORT_KEYS).decode()
    text = f"Task: {task.goal}\nPayload (JSON): {params}"
    if task.effect is not None:
        from effectbench.core.codec import converter

        effect = orjson.dumps(converter.unstructure(task.effect), option=orjson.OPT_SORT_KEYS)
        text += f"\nThe record must end up like this (declared effect, JSON): {effect.decode()}"
    return text


def _halt(message: str) -> AgentReport:
    return AgentReport(reported_success=False, halted=True, message=message)


def _arguments(raw: object) -> Mapping[str, Any]:
    """A tool call's arguments: a JSON object given as a string (or, leniently, inline)."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        raise ToolError("arguments must be a JSON object encoded as a string")
    try:
        parsed = orjson.loads(raw or "{}")
    except orjson.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ToolError("arguments must be a JSON object")
    return parsed


@attrs.define
class _State:
    calls: int = 0
    tokens: int = 0
    bad: int = 0


@attrs.frozen
class _Called:
    tool: str | None
    result: Any
    args: Mapping[str, Any] | None
    """The parsed arguments, None when the call was malformed."""


async def _call_tool(
    call: Mapping[str, Any], tools: Mapping[str, Tool], telemetry: Telemetry
) -> _Called:
    """Run one tool call; a malformed one gives an error result and no arguments."""
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    assert isinstance(function, dict)
    name = function.get("name")
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        telemetry.action("tool_call", tool=str(name), ok=False)
        return _Called(
            None, {"error": f"unknown tool {name!r}; the tools are: {', '.join(tools)}"}, None
        )
    try:
        args = _arguments(function.get("arguments"))
        result = await tool.run(args)
    except ToolError as exc:
        telemetry.action("tool_call", tool=tool.name, ok=False)
        return _Called(tool.name, {"error": str(exc)}, None)
    telemetry.action("tool_call", tool=tool.name, ok=True)
    return _Called(tool.name, result, args)


async def run_loop(
    task: TaskView,
    client: ChatClient,
    tools: Mapping[str, Tool],
    budget: Budget,
    telemetry: Telemetry,
) -> AgentReport:
    """Drive the model until it reports, halts or runs out of budget."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": user_prompt(task)},
    ]
    specs = [t.spec() for t in tools.values()]
    st = _State()
    while True:
        if st.calls >= budget.max_calls:
            return _halt(f"call budget exhausted: {st.calls} model calls without a report")
        completion = await client.complete(messages, specs)
        st.calls += 1
        st.tokens += completion.total_tokens
        if st.tokens > budget.max_tokens:  # before this turn's tool calls run: none of them do
            return _halt(f"token budget exhausted: {st.tokens} tokens > {budget.max_tokens}")
        message = dict(completion.message)
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            calls = []
        messages.append(
            {
                "role": "assistant",
                "content": message.get("content"),
                **({"tool_calls": calls} if calls else {}),
            }
        )
        if not calls:
            content = message.get("content")
            text = content[:200] if isinstance(content, str) else ""
            return _halt(f"model stopped without calling {FINISH}: {text}".rstrip(": "))
        for call in calls:
            call = call if isinstance(call, dict) else {}
            done = await _call_tool(call, tools, telemetry)
            args = done.args
            if args is not None and done.tool == FINISH:
                success, note = bool(args["success"]), str(args.get("message", ""))
                return AgentReport(reported_success=success, halted=not success, message=note)
            st.bad += args is None
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": str(call.get("id", "")),
                    "content": encode_result(done.result),
                }
            )
            if st.bad >= budget.max_bad_tool_calls:
                return _halt(f"{st.bad} malformed tool calls (last: {done.result['error']})")
