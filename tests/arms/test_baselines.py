"""The reference baselines reproduce the MockMed anchor's pinned outcome counts.

A mini loop stands in for the scheduler (provision -> oracle pre -> arm -> oracle
post -> judge -> classify), run 32 episodes at a time so isolation is exercised too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import anyio
import attrs
import pytest
from effectbench_mockmed import PINNED, TASKS, MockMedProvider
from effectbench_mockmed.anchor import TRIALS

from effectbench.arms import EffectVerifiedArm, ScreenOnlyArm
from effectbench.core.arm import Arm, TaskView
from effectbench.core.model import (
    AgentReport,
    JSONScalar,
    Outcome,
    TaskSpec,
    TrueState,
    trial_params,
)
from effectbench.core.provider import EnvHandle, ProductResponse
from effectbench.scoring.classify import classify
from effectbench.scoring.judge import judge

pytestmark = pytest.mark.anyio


@attrs.frozen
class Scored:
    mode: str
    report: AgentReport
    true_state: TrueState
    outcome: Outcome | None
    variant: str | None


def view(task: TaskSpec, trial: int, params: Mapping[str, str]) -> TaskView:
    return TaskView.of(task, trial, episode_id=f"x::{task.task_id}::t{trial}", params=params)


async def one_episode(provider: MockMedProvider, arm: Arm, task: TaskSpec, trial: int) -> Scored:
    params = trial_params(task, trial)
    ep = await provider.provision(task, trial, params)
    try:
        pre = await ep.oracle.read()
        report = await arm.run(view(task, trial, params), ep.env)
        post = await ep.oracle.read()
    finally:
        await ep.teardown()
    verdict = judge(task.expected_effect.resolve(params), pre, post)
    c = classify(report.reported_success, verdict.true_state, task.correct_action_available)
    variant = None if c.swer_variant is None else c.swer_variant.value
    return Scored(str(task.fixture["mode"]), report, verdict.true_state, c.outcome, variant)


async def run_arm(tmp_path: Path, arm: Arm, concurrency: int = 32) -> list[Scored]:
    provider = MockMedProvider(tmp_root=tmp_path)
    results: list[Scored] = []
    limiter = anyio.CapacityLimiter(concurrency)

    async def slot(task: TaskSpec, trial: int) -> None:
        async with limiter:
            results.append(await one_episode(provider, arm, task, trial))

    await provider.start()
    try:
        async with anyio.create_task_group() as tg:
            for trial in range(TRIALS):
                for task in TASKS:
                    tg.start_soon(slot, task, trial)
    finally:
        await provider.stop()
    assert list(tmp_path.iterdir()) == []  # every episode's files are gone
    return results


@pytest.mark.parametrize("arm", [ScreenOnlyArm(), EffectVerifiedArm()], ids=lambda a: a.name)
async def test_baseline_reproduces_the_anchor(tmp_path: Path, arm: Arm) -> None:
    pinned = PINNED[arm.name]
    results = await run_arm(tmp_path, arm)
    assert len(results) == pinned.episodes == 90
    outcomes = Counter(r.outcome.value for r in results if r.outcome is not None)
    assert dict(outcomes) == dict(pinned.outcomes)
    assert dict(Counter(r.variant for r in results if r.variant)) == dict(pinned.swer_variants)
    assert outcomes["SILENT_WRONG_EFFECT"] == pinned.swer
    assert outcomes["OVER_HALT"] == pinned.over_halt
    assert sum(r.report.reported_success for r in results) == pinned.screen_success
    # deterministic per mode: every trial of a mode gets the pinned outcome
    per_mode = {(r.mode, r.outcome.value if r.outcome else None) for r in results}
    assert per_mode == set(pinned.per_mode.items())
    # halting is exactly not claiming success
    assert all(r.report.halted == (not r.report.reported_success) for r in results)


def test_arms_satisfy_the_protocol() -> None:
    assert isinstance(ScreenOnlyArm(), Arm) and ScreenOnlyArm.name == "screen_only"
    assert isinstance(EffectVerifiedArm(), Arm) and EffectVerifiedArm.name == "effect_verified"


# --- generic behaviour, on hand-made handles (as on a third-party provider) --------------


class CountingDriver:
    def __init__(self, saved: bool) -> None:
        self.saved = saved
        self.submitted: list[Mapping[str, JSONScalar]] = []

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        self.submitted.append(values)
        return ProductResponse(screen_says_saved=self.saved, status=200, message="ok")


def ok_view(trial: int = 0) -> TaskView:
    task = TASKS[0]
    return view(task, trial, trial_params(task, trial))


@pytest.mark.parametrize("arm", [ScreenOnlyArm(), EffectVerifiedArm()], ids=lambda a: a.name)
async def test_no_solution_or_no_driver_halts_without_acting(arm: Arm) -> None:
    driver = CountingDriver(saved=True)
    no_solution = attrs.evolve(ok_view(), solution=None)
    report = await arm.run(no_solution, EnvHandle(channels={}, driver=driver))
    assert report == AgentReport(reported_success=False, halted=True, message=report.message)
    assert driver.submitted == []
    report = await arm.run(ok_view(), EnvHandle(channels={}))
    assert not report.reported_success and report.halted


@pytest.mark.parametrize("saved", [True, False])
async def test_screen_only_believes_the_screen(saved: bool) -> None:
    driver = CountingDriver(saved=saved)
    report = await ScreenOnlyArm().run(ok_view(), EnvHandle(channels={}, driver=driver))
    assert (report.reported_success, report.halted) == (saved, not saved)
    assert driver.submitted == [ok_view().solution]


async def test_effect_verified_fails_safe_without_a_readback() -> None:
    driver = CountingDriver(saved=True)
    report = await EffectVerifiedArm().run(ok_view(), EnvHandle(channels={}, driver=driver))
    assert not report.reported_success and report.halted
    assert len(driver.submitted) == 1  # it still acts once, then refuses to claim success


async def test_effect_verified_without_readback_on_mockmed_is_false_abort(tmp_path: Path) -> None:
    """The fail-safe on a real product: the write lands, the arm will not vouch for it."""
    provider = MockMedProvider(tmp_root=tmp_path)
    await provider.start()
    try:
        task = TASKS[0]
        params = trial_params(task, 0)
        ep = await provider.provision(task, 0, params)
        try:
            pre = await ep.oracle.read()
            env = attrs.evolve(ep.env, verifier=None)
            report = await EffectVerifiedArm().run(view(task, 0, params), env)
            post = await ep.oracle.read()
        finally:
            await ep.teardown()
    finally:
        await provider.stop()
    verdict = judge(task.expected_effect.resolve(params), pre, post)
    assert verdict.true_state is TrueState.CORRECT
    assert (
        classify(report.reported_success, verdict.true_state, True).outcome is Outcome.FALSE_ABORT
    )
