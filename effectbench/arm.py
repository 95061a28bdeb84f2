"""What an agent under test implements.

An arm gets a TaskView (the intent, this trial's payload, the declared effect when
the task declares one) and an EnvHandle (the product's channels only). It returns an
AgentReport, which the harness logs and never trusts for success.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import attrs

from effectbench.model import AgentReport, Effect, JSONScalar, Substrate, Value
from effectbench.provider import EnvHandle


@attrs.frozen
class TaskView:
    """The arm's view of a task. No category, no fixture data, no oracle wiring.

    ``effect`` is the resolved declared effect, or None for effect-undeclared tasks.
    ``solution`` is the intended submission resolved for this trial, for scripted
    arms; None when the task offers no correct action to script.
    """

    episode_id: str
    goal: str
    substrate: Substrate
    params: Mapping[str, str]
    effect: Effect | None
    solution: Mapping[str, JSONScalar] | None
    trial: int


@runtime_checkable
class Arm(Protocol):
    name: str

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport: ...


__all__ = ["AgentReport", "Arm", "TaskView", "Value"]
