"""What a stand-in script answers: a note to itself and actions, in the action space's names."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from effectbench.testing.computer_use.sight import View

__all__ = ["Act", "Answer", "Script", "done", "last_step"]

Act = tuple[str, Mapping[str, Any]]


@attrs.frozen
class Answer:
    note: Mapping[str, Any]
    actions: tuple[Act, ...]


Script = Callable[[str, Sequence[Mapping[str, Any]], "View | None"], Answer]
"""(the task prompt, the script's earlier notes, the latest screenshot's view) -> Answer."""


def done(success: bool, message: str, note: Mapping[str, Any] | None = None) -> Answer:
    return Answer(note or {"step": "done"}, (("done", {"success": success, "message": message}),))


def last_step(notes: Sequence[Mapping[str, Any]]) -> str:
    return str(notes[-1].get("step", "")) if notes else ""
