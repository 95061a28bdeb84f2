"""The two reference baselines of the spec.

``screen_only`` trusts what the product's screen says after it acts. That is the
behaviour the benchmark indicts: its success claims are only as good as the banner.

``effect_verified`` trusts only the product's own record readback: it reads before,
acts, reads after, and claims success only when the declared effect holds in what
the product reads back. Without a readback it acts, then fails safe (reports failure
and halts), because an unverified success claim is exactly what SWER counts.

Both act exactly once, through ``env.driver``, with the task's scripted solution.
"""

from __future__ import annotations

from typing import Final

from effectbench.arm import TaskView
from effectbench.judge import judge
from effectbench.model import AgentReport, TrueState
from effectbench.provider import EnvHandle

_NO_SCRIPT: Final = "no scripted action: the task offers no solution or the provider no driver"


def _cannot_act(task: TaskView, env: EnvHandle) -> AgentReport | None:
    if task.solution is None or env.driver is None:
        return AgentReport(reported_success=False, halted=True, message=_NO_SCRIPT)
    return None


class ScreenOnlyArm:
    """Submits once; reports success exactly when the screen says saved, else halts."""

    name: str = "screen_only"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        refused = _cannot_act(task, env)
        if refused is not None:
            return refused
        assert task.solution is not None and env.driver is not None
        response = await env.driver.submit(task.solution)
        if response.screen_says_saved:
            return AgentReport(
                reported_success=True,
                halted=False,
                message=f"screen says saved: {response.message}",
            )
        return AgentReport(
            reported_success=False,
            halted=True,
            message=f"screen did not confirm the save (status {response.status}): {response.message}",
        )


class EffectVerifiedArm:
    """Acts once and claims success only when the product's readback confirms the declared effect."""

    name: str = "effect_verified"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        refused = _cannot_act(task, env)
        if refused is not None:
            return refused
        assert task.solution is not None and env.driver is not None
        verifier = env.product_effect_verifier()
        if verifier is None or task.effect is None:
            await env.driver.submit(task.solution)
            why = (
                "no product readback offered"
                if verifier is None
                else "the task declares no effect to check"
            )
            return AgentReport(
                reported_success=False, halted=True, message=f"acted but cannot verify: {why}"
            )
        before = await verifier.read()
        await env.driver.submit(task.solution)
        after = await verifier.read()
        verdict = judge(task.effect, before, after)
        if verdict.true_state is TrueState.CORRECT:
            return AgentReport(
                reported_success=True, halted=False, message="readback confirms the declared effect"
            )
        detail = "; ".join(verdict.reasons) or verdict.true_state.value
        return AgentReport(
            reported_success=False,
            halted=True,
            message=f"readback does not confirm the effect ({verdict.true_state.value}): {detail}",
        )
