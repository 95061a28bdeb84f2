"""The reference arm: what a correct agent does, so the audit can show the oracle
credits it (and the adversaries' tricks do not). Registered as ``oracle``, its old name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from effectbench.core.arm import TaskView
from effectbench.core.model import AgentReport, JSONScalar
from effectbench.core.provider import EnvHandle, ProductResponse

__all__ = ["REFERENCE_NAME", "OracleArm", "ReferenceArm", "Solution", "cannot_act", "submit"]

REFERENCE_NAME: Final = "oracle"
"""The reference arm's name in plans and logs (kept from when it was called OracleArm)."""
Solution = Mapping[str, JSONScalar]


async def submit(env: EnvHandle, values: Solution, attempt: int) -> ProductResponse | None:
    """One submission through the product driver; a driver error is recorded, not raised,
    because an arm that claims success regardless is exactly what the oracle must catch."""
    assert env.driver is not None
    try:
        return await env.driver.submit(values)
    except Exception as exc:  # noqa: BLE001 - recorded as an action, the oracle decides
        env.telemetry.action(
            "submit_error", attempt=attempt, error=f"{type(exc).__name__}: {exc}"[:300]
        )
        return None


def cannot_act(task: TaskView, env: EnvHandle) -> str | None:
    if task.solution is None:
        return "the task offers no solution to script"
    if env.driver is None:
        return "the provider offers no product driver"
    return None


class ReferenceArm:
    """The reference: performs the intended action exactly once when one exists and
    reports success; halts with nothing written when the task offers no solution."""

    name: str = REFERENCE_NAME
    records_actions = True
    """Every episode records what it did: a count of 0 would be counted, not unknown."""

    def __init__(self, *, mutation_audit: bool = False) -> None:
        self.mutation_audit = mutation_audit
        """Asks the harness to mutation-test the task's oracle after this arm's first
        trial (``effectbench audit`` sets it; run/mutate.py). The arm itself never
        touches the store: the harness does, on twins of its own."""

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        why = cannot_act(task, env)
        if why is not None or task.solution is None:
            env.telemetry.action("reference", wrote=False, reason=why)
            return AgentReport(reported_success=False, halted=True, message=f"Halting: {why}.")
        env.telemetry.action("reference", wrote=True, submissions=1)
        await submit(env, task.solution, 1)
        return AgentReport(
            reported_success=True, halted=False, message="Submitted the intended record once."
        )


OracleArm: Final = ReferenceArm
"""The old name (and the ``oracle`` entry point's old target)."""
