"""What one model turn is, whatever the wire format: the calls it made and its usage.

A wire format (``openai_wire``, ``anthropic_wire``) turns the conversation into its own
request shape and each answer into a ``Turn``; the loop (``loop``) never sees either
shape. ``Call.args`` is None when the call could not be read, ``error`` says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

__all__ = ["Call", "Turn", "Wire"]


@attrs.frozen
class Call:
    """One action the model asked for, in the computer action space's names."""

    id: str
    name: str
    args: Mapping[str, Any] | None
    error: str | None = None


@attrs.frozen
class Turn:
    calls: tuple[Call, ...]
    text: str
    tokens: int
    """Input plus output tokens of this call (0 when the endpoint reported none)."""


@attrs.frozen
class Result:
    """What became of one call: ``ok`` or the error the model is told of."""

    call: Call
    error: str | None = None


class Wire(Protocol):
    """One episode's conversation in one wire format."""

    def begin(self, system: str, prompt: str, png: bytes) -> None:
        """The system prompt, the task and the first screenshot."""
        ...

    async def ask(self) -> Turn:
        """One model call over the conversation so far (its usage goes to telemetry)."""
        ...

    def reply(self, results: Sequence[Result], png: bytes | None) -> None:
        """Each call's result and, when the screen was captured, the screenshot after."""
        ...
