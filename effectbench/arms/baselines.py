"""The two reference baselines of the spec, and the decisions every scripted arm shares.

``screen_only`` trusts what the product's screen says after it acts. That is the
behaviour the benchmark indicts: its success claims are only as good as the banner.

``effect_verified`` trusts only the product's own record readback: it reads before,
acts, reads after, and claims success only when the declared effect holds in what
the product reads back. Without a readback it acts, then fails safe (reports failure
and halts), because an unverified success claim is exactly what SWER counts.

Both act exactly once, through ``env.driver``, with the task's scripted solution. The
two decisions (``trust_screen``, ``trust_reads``) take the read path and the way to
submit as arguments, so the read-path ladder's arms are these same decisions over
other read paths (``effectbench.arms.ladder``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from effectbench.arms.own_change import own_change
from effectbench.core.arm import TaskView
from effectbench.core.model import AgentReport, DiffEffect, Snapshot, TrueState
from effectbench.core.provider import EnvHandle, ProductResponse
from effectbench.scoring.judge import judge

__all__ = [
    "EffectVerifiedArm",
    "Reader",
    "ScreenOnlyArm",
    "Submit",
    "submit_scripted",
    "trust_reads",
    "trust_screen",
]

NO_SCRIPT: Final = "no scripted action: the task offers no solution or the provider no driver"

Reader = Callable[[], Awaitable[Snapshot]]
Submit = Callable[[TaskView, EnvHandle], Awaitable[ProductResponse]]


def _halt(message: str) -> AgentReport:
    return AgentReport(reported_success=False, halted=True, message=message)


async def submit_scripted(task: TaskView, env: EnvHandle) -> ProductResponse:
    """Submit the task's solution once; a driver error propagates (the arm failed)."""
    assert task.solution is not None and env.driver is not None
    return await env.driver.submit(task.solution)


async def trust_screen(task: TaskView, env: EnvHandle, submit: Submit) -> AgentReport:
    """Submit once; report success exactly when the screen says saved, else halt."""
    if task.solution is None or env.driver is None:
        return _halt(NO_SCRIPT)
    response = await submit(task, env)
    if response.screen_says_saved:
        return AgentReport(
            reported_success=True, halted=False, message=f"screen says saved: {response.message}"
        )
    return _halt(f"screen did not confirm the save (status {response.status}): {response.message}")


async def trust_reads(
    task: TaskView, env: EnvHandle, reader: Reader | None, path: str, submit: Submit
) -> AgentReport:
    """Read, submit once, read again, and claim success only when the declared effect holds
    in the two reads. Without a read path or a declared effect: submit, then fail safe."""
    if task.solution is None or env.driver is None:
        return _halt(NO_SCRIPT)
    if reader is None or task.effect is None:
        await submit(task, env)
        why = f"no {path} offered" if reader is None else "the task declares no effect to check"
        return _halt(f"acted but cannot verify: {why}")
    before = await reader()
    await submit(task, env)
    after = await reader()
    if isinstance(task.effect, DiffEffect) and task.effect.is_reference:
        return _own_change_report(task, before, after, path)
    verdict = judge(task.effect, before, after)
    if verdict.true_state is TrueState.CORRECT:
        return AgentReport(
            reported_success=True, halted=False, message=f"the {path} confirms the declared effect"
        )
    detail = "; ".join(verdict.reasons) or verdict.true_state.value
    return _halt(f"the {path} does not confirm the effect ({verdict.true_state.value}): {detail}")


def _own_change_report(task: TaskView, before: Snapshot, after: Snapshot, path: str) -> AgentReport:
    """A reference-mode task: the expected diff is not in the view, so claim success only
    when the change is one's own submission, and say that this is what was checked
    (effectbench.arms.own_change)."""
    assert isinstance(task.effect, DiffEffect)
    confirmed, why = own_change(task.effect, task.solution, task.params, before, after)
    if confirmed:
        return AgentReport(
            reported_success=True,
            halted=False,
            message=f"the {path} shows the submission landed ({why}); the expected diff is "
            "the reference program's, which the task view does not give",
        )
    return _halt(f"the {path} does not show the submission landing as asked: {why}")


class ScreenOnlyArm:
    """Submits once; reports success exactly when the screen says saved, else halts."""

    name: str = "screen_only"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        return await trust_screen(task, env, submit_scripted)


class EffectVerifiedArm:
    """Acts once and claims success only when the product's readback confirms the declared
    effect."""

    name: str = "effect_verified"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        verifier = env.product_effect_verifier()
        reader = None if verifier is None else verifier.read
        return await trust_reads(task, env, reader, "product readback", submit_scripted)
