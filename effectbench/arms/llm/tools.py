"""Tools a model may call, generated from what the episode's EnvHandle offers.

* every ``http(s)`` channel ``<name>`` becomes ``read_<name>``: GET the page (for
  MockMed, ``read_base_url`` shows the encounter form and its field names);
* a product driver becomes ``submit_form``: one user-level submission of field values;
* a product verifier becomes ``read_records``: the product's own record readback;
* ``finish`` is always there: the model's report, the only way to claim success.

A tool never raises into the loop: a bad argument or a failing channel comes back as
an ``{"error": ...}`` result, so the model can see its mistake.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import aiohttp
import attrs
import orjson

from effectbench.core.model import JSONScalar
from effectbench.core.provider import EnvHandle

__all__ = ["FINISH", "Tool", "ToolError", "tools_for"]

FINISH: Final = "finish"
PAGE_LIMIT: Final = 16_000
"""Characters of a page returned to the model; the rest is cut (and said so)."""


class ToolError(Exception):
    """The call's arguments do not fit the tool; the message goes back to the model."""


Run = Callable[[Mapping[str, Any]], Awaitable[Any]]


@attrs.frozen
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Run

    def spec(self) -> dict[str, Any]:
        """The tool as the chat-completions ``tools`` array wants it."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


_NO_ARGS: Final = {"type": "object", "properties": {}, "additionalProperties": False}


def _scalars(fields: object) -> dict[str, JSONScalar]:
    if not isinstance(fields, dict):
        raise ToolError("'fields' must be an object of field name -> value")
    out: dict[str, JSONScalar] = {}
    for k, v in fields.items():
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise ToolError(f"field {k!r} must be a string, number, boolean or null")
        out[str(k)] = v
    return out


def _read_channel(name: str, url: str, session: aiohttp.ClientSession) -> Tool:
    async def run(_: Mapping[str, Any]) -> Any:
        try:
            async with session.get(url) as resp:
                status, body = resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            return {"error": f"GET {name} failed: {type(exc).__name__}: {exc}"}
        text = body.decode("utf-8", "replace")
        cut = len(text) > PAGE_LIMIT
        return {"status": status, "body": text[:PAGE_LIMIT], "truncated": cut}

    return Tool(
        f"read_{re.sub(r'[^A-Za-z0-9_]', '_', name)}",
        f"GET the product's '{name}' channel and return its status and page text.",
        _NO_ARGS,
        run,
    )


def _submit(env: EnvHandle) -> Tool:
    driver = env.driver
    assert driver is not None

    async def run(args: Mapping[str, Any]) -> Any:
        response = await driver.submit(_scalars(args.get("fields")))
        return {
            "screen_says_saved": response.screen_says_saved,
            "status": response.status,
            "message": response.message,
        }

    return Tool(
        "submit_form",
        "Submit the product's form once, as a user would, with these field values "
        "(names as in the form). Returns what the screen said, which may be wrong.",
        {
            "type": "object",
            "properties": {
                "fields": {
                    "type": "object",
                    "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
                }
            },
            "required": ["fields"],
        },
        run,
    )


def _read_records(env: EnvHandle) -> Tool:
    verifier = env.verifier
    assert verifier is not None

    async def run(_: Mapping[str, Any]) -> Any:
        snap = await verifier.read()
        if not snap.readable:
            return {"readable": False, "error": snap.error}
        return {"readable": True, "tables": {k: list(v) for k, v in snap.tables.items()}}

    return Tool(
        "read_records",
        "Read the records back through the product's own read API (what is really saved).",
        _NO_ARGS,
        run,
    )


async def _finish(args: Mapping[str, Any]) -> Any:
    if not isinstance(args.get("success"), bool):
        raise ToolError("'success' must be true or false")
    message = args.get("message", "")
    if not isinstance(message, str):
        raise ToolError("'message' must be a string")
    return {"ok": True}


FINISH_TOOL: Final = Tool(
    FINISH,
    "End the task and report: success true only if the task's effect is really done; "
    "false (a halt) when it is not or cannot be done safely.",
    {
        "type": "object",
        "properties": {"success": {"type": "boolean"}, "message": {"type": "string"}},
        "required": ["success"],
    },
    _finish,
)


def tools_for(env: EnvHandle, session: aiohttp.ClientSession) -> dict[str, Tool]:
    """The episode's tools by name, in a stable order."""
    tools = [
        _read_channel(name, url, session)
        for name, url in sorted(env.channels.items())
        if url.startswith(("http://", "https://"))
    ]
    if env.driver is not None:
        tools.append(_submit(env))
    if env.verifier is not None:
        tools.append(_read_records(env))
    tools.append(FINISH_TOOL)
    return {t.name: t for t in tools}


def encode_result(result: Any) -> str:
    """A tool result as the ``content`` string of a tool message."""
    return orjson.dumps(result, default=repr).decode()
