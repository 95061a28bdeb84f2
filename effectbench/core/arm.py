"""What an agent under test implements.

An arm gets a TaskView (the intent, this trial's payload, the declared effect when
the task declares one) and an EnvHandle (the product's channels only). It returns an
AgentReport, which the harness logs and never trusts for success.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import attrs

from effectbench.core.model import (
    AgentReport,
    AnyEffect,
    JSONScalar,
    Substrate,
    TaskSpec,
    Value,
    resolve_value,
    trial_params,
)
from effectbench.core.provider import EnvHandle


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
    effect: AnyEffect | None
    solution: Mapping[str, JSONScalar] | None
    trial: int

    @classmethod
    def of(
        cls,
        task: TaskSpec,
        trial: int,
        *,
        episode_id: str,
        params: Mapping[str, str] | None = None,
        effect: AnyEffect | None = None,
    ) -> TaskView:
        """What an arm may see of ``task`` in one trial: the one place that rule lives.

        ``params`` and ``effect`` default to the trial's payload and the resolved declared
        effect; callers that already resolved them (the scheduler) pass them in. The effect
        is withheld when the task does not declare it, whatever is passed.
        """
        if params is None:
            params = trial_params(task, trial)
        shown = None
        if task.effect_declared:
            shown = task.expected_effect.resolve(params) if effect is None else effect
        solution = task.solution
        return cls(
            episode_id=episode_id,
            goal=task.goal,
            substrate=task.substrate,
            params=params,
            effect=shown,
            solution=None
            if solution is None
            else {k: resolve_value(v, params) for k, v in solution.items()},
            trial=trial,
        )


@runtime_checkable
class Arm(Protocol):
    name: str

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport: ...


__all__ = ["AgentReport", "Arm", "TaskView", "Value"]
