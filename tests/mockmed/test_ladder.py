"""The read-path ladder: ten scenarios over real HTTP and a real two-table SQLite file.

The headline test drives the CLI in a subprocess (90 episodes per arm, concurrency 32)
and checks the measured SWER 54/90 -> 9/90 -> 0/90, with every effect_rest miss on the
stray billing write. The others pin each scenario's product behaviour and each arm's
reasoning, so a broken scenario is named rather than only shifting a count.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from effectbench_mockmed.faults import LADDER_FAULTS, LADDER_HANG_S
from effectbench_mockmed.packs_ladder import (
    LADDER_SWER,
    LADDER_TASKS,
    LADDER_TRIALS,
    SCENARIOS,
    SQLITE_RO_CHANNEL,
    SUBMIT_TIMEOUT_S,
    MockMedLadderProvider,
)

from effectbench.arms.ladder import EffectFullArm, EffectRestArm, ScreenArm
from effectbench.core.arm import TaskView
from effectbench.core.model import (
    JSONScalar,
    Snapshot,
    TaskSpec,
    TrueState,
)
from effectbench.core.provider import BenchmarkProvider, EnvHandle, ProductResponse, Telemetry
from effectbench.oracles.sqlite import SqliteAllTablesOracle, read_all_tables
from effectbench.scoring.judge import judge
from effectbench.testing import run_cli

pytestmark = pytest.mark.anyio


@pytest.fixture
async def ladder(tmp_path: Path) -> AsyncIterator[MockMedLadderProvider]:
    p = MockMedLadderProvider(tmp_root=tmp_path)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


def task(mode: str) -> TaskSpec:
    return next(t for t in LADDER_TASKS if t.task_id == f"ladder::{mode}")


def view(t: TaskSpec, trial: int = 0, *, declared: bool = True) -> TaskView:
    assert t.solution is not None
    shown = t if declared else attrs.evolve(t, effect_declared=False)
    return TaskView.of(shown, trial, episode_id=f"x::{t.task_id}::t{trial}")


# --- the headline numbers, through the CLI ------------------------------------------------


def test_ladder_reproduces_the_measured_swer_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli(
        "run",
        "--provider",
        "mockmed-ladder",
        "--arm",
        "screen",
        "--arm",
        "effect_rest",
        "--arm",
        "effect_full",
        "--trials",
        str(LADDER_TRIALS),
        "--concurrency",
        "32",
        "--out",
        str(out),
        "-q",
        timeout=180,
        env={**os.environ, "EFFECTBENCH_STATE_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    metrics = orjson.loads((out / "metrics.json").read_bytes())
    swer = {arm: metrics["arms"][arm]["swer"] for arm in LADDER_SWER}
    assert {arm: (s["numerator"], s["denominator"]) for arm, s in swer.items()} == {
        "screen": (54, 90),
        "effect_rest": (9, 90),
        "effect_full": (0, 90),
    }
    rows = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    assert len(rows) == 270 and all(r["eligible"] for r in rows)
    swe = Counter((r["arm"], r["task_id"]) for r in rows if r["outcome"] == "SILENT_WRONG_EFFECT")
    assert {task_id for arm, task_id in swe if arm == "effect_rest"} == {
        "ladder::collateral_unaudited"
    }
    assert swe[("effect_rest", "ladder::collateral_unaudited")] == 9
    # screen is silently wrong on exactly the six scenarios whose banner lies
    assert {task_id.split("::")[1] for arm, task_id in swe if arm == "screen"} == {
        "no_persist",
        "partial",
        "duplicate",
        "wrong_record",
        "stale",
        "collateral_unaudited",
    }
    # 409, 401 and the hung save show no banner: screen halts on them
    per = {(r["arm"], r["task_id"].split("::")[1]): r["outcome"] for r in rows}
    assert per[("screen", "optimistic")] == per[("screen", "session")] == "SAFE_HALT"
    assert per[("screen", "timeout")] == "FALSE_ABORT"
    assert per[("effect_full", "collateral_unaudited")] == "WRONG_ACTION"
    assert (out / "manifest.json").is_file()
    assert not list(tmp_path.glob("effectbench-*"))  # the run removed its state root


# --- the pack -------------------------------------------------------------------------------


def test_pack_shape() -> None:
    assert [t.task_id.split("::")[1] for t in LADDER_TASKS] == [s for s, _, _ in SCENARIOS]
    assert len(LADDER_TASKS) == 10 and set(LADDER_FAULTS) == {s for s, _, _ in SCENARIOS}
    for t in LADDER_TASKS:
        rw = t.expected_effect.record_written
        assert rw.forbid_stray_writes and rw.forbid_collateral_loss and rw.expected_count == 1
    assert LADDER_HANG_S > SUBMIT_TIMEOUT_S
    assert isinstance(MockMedLadderProvider(), BenchmarkProvider)
    assert MockMedLadderProvider().name == "mockmed-ladder"


# mode -> (banner says saved, encounters stored as (patient, note is ours), billing rows)
PRODUCT: dict[str, tuple[bool, list[tuple[str, bool]], int]] = {
    "ok": (True, [("p1", True)], 0),
    "no_persist": (True, [], 0),
    "partial": (True, [("p1", False)], 0),
    "duplicate": (True, [("p1", True), ("p1", True)], 0),
    "wrong_record": (True, [("p2", True)], 0),
    "stale": (True, [("p1", True)], 0),
    "collateral_unaudited": (True, [("p1", True)], 1),
    "optimistic": (False, [], 0),
    "session": (False, [], 0),
    "timeout": (False, [("p1", True)], 0),
}


@pytest.mark.parametrize("mode", list(PRODUCT))
async def test_scenario_over_http(ladder: MockMedLadderProvider, mode: str) -> None:
    t = task(mode)
    v = view(t)
    ep = await ladder.provision(t, 0, v.params)
    try:
        assert ep.env.driver is not None and v.solution is not None
        response = await ep.env.driver.submit(v.solution)
        post = await ep.oracle.read()
        rest = await ep.env.verifier.read() if ep.env.verifier else None
    finally:
        await ep.teardown()
    saved, stored, bills = PRODUCT[mode]
    assert response.screen_says_saved is saved
    assert isinstance(ep.oracle, SqliteAllTablesOracle)
    assert post.readable and set(post.tables) == {"encounters", "billing"}
    ours = [r for r in post.rows("encounters") if r["source"] == "ui"]
    assert [(r["patient_id"], r["note"] == v.params["note"]) for r in ours] == stored
    assert len(post.rows("billing")) == bills
    if mode == "stale":
        assert not [r for r in post.rows("encounters") if r["type"] == "Urgent"]
    if mode == "optimistic":
        assert response.status == 409
    if mode == "timeout":
        assert response.status is None  # the driver gave up; the commit happened anyway
    # the product's own readback never shows the billing table
    assert rest is not None and rest.readable and set(rest.tables) == {"encounters"}


async def test_a_timed_out_save_never_lends_its_connection_to_another_episode(
    ladder: MockMedLadderProvider,
) -> None:
    """Episodes share one keep-alive pool. The timed-out save's connection still has
    its request in flight: pooled, it would carry the next episode's requests, which
    would then read the late answer (a 200 'Saved' page) instead of their own."""
    hung, ok = task("timeout"), task("ok")
    a, b = view(hung), view(ok, 1)
    ep_a = await ladder.provision(hung, 0, a.params)
    ep_b = await ladder.provision(ok, 1, b.params)
    try:
        assert ep_a.env.driver is not None and ep_b.env.driver is not None
        assert a.solution is not None and b.solution is not None
        assert (await ep_a.env.driver.submit(a.solution)).status is None  # gave up
        assert ep_b.env.verifier is not None
        before = await ep_b.env.verifier.read()
        assert before.readable, before.error
        response = await ep_b.env.driver.submit(b.solution)
        after = await ep_b.env.verifier.read()
    finally:
        await ep_a.teardown()
        await ep_b.teardown()
    assert response.screen_says_saved and response.status == 200
    assert after.readable
    assert [r["note"] for r in after.rows("encounters") if r["source"] == "ui"] == [
        b.params["note"]
    ]


async def test_read_only_channel_sees_what_the_rest_readback_hides(
    ladder: MockMedLadderProvider,
) -> None:
    t = task("collateral_unaudited")
    v = view(t)
    ep = await ladder.provision(t, 0, v.params)
    try:
        path = ep.env.channels[SQLITE_RO_CHANNEL]
        pre_full, pre_rest = read_all_tables(path), await ep.env.verifier.read()  # type: ignore[union-attr]
        assert ep.env.driver is not None and v.solution is not None
        await ep.env.driver.submit(v.solution)
        post_full, post_rest = read_all_tables(path), await ep.env.verifier.read()  # type: ignore[union-attr]
        assert v.effect is not None
        assert judge(v.effect, pre_rest, post_rest).true_state is TrueState.CORRECT
        full = judge(v.effect, pre_full, post_full)
        assert full.true_state is TrueState.WRONG_PERSISTED
        assert any("billing" in r for r in full.reasons)
        # the channel is read-only: a write through the arm's reader fails
        import sqlite3

        from effectbench.oracles.sqlite import connect_ro

        conn = connect_ro(path)
        try:
            with pytest.raises(sqlite3.Error):
                conn.execute("DELETE FROM billing")
        finally:
            conn.close()
    finally:
        await ep.teardown()


# --- each arm's reasoning ----------------------------------------------------------------


class _Driver:
    def __init__(self, response: ProductResponse | Exception) -> None:
        self.response = response
        self.calls = 0

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        self.calls += 1
        if isinstance(self.response, Exception):
            raise self.response
        return self.response


class _Reader:
    async def read(self) -> Snapshot:
        return Snapshot(readable=True, tables={"encounters": ()})


async def test_screen_trusts_only_the_banner() -> None:
    v = view(task("ok"))
    yes = await ScreenArm().run(
        v, EnvHandle({}, Telemetry(), _Driver(ProductResponse(True, 200, "Saved")))
    )
    no = await ScreenArm().run(
        v, EnvHandle({}, Telemetry(), _Driver(ProductResponse(False, 409, "x")))
    )
    crashed = await ScreenArm().run(v, EnvHandle({}, Telemetry(), _Driver(TimeoutError("slow"))))
    assert yes.reported_success and not yes.halted
    assert not no.reported_success and no.halted
    assert not crashed.reported_success and crashed.halted


async def test_screen_is_screen_only_s_decision_except_for_a_driver_error() -> None:
    """One decision, two submit policies: the same report for every response the product
    gives; a raising driver is an error page for ``screen`` and an arm failure for
    ``screen_only``."""
    from effectbench.arms.baselines import EffectVerifiedArm, ScreenOnlyArm

    v = view(task("ok"))
    for response in (ProductResponse(True, 200, "Saved"), ProductResponse(False, 401, "expired")):
        ladder_report = await ScreenArm().run(v, EnvHandle({}, Telemetry(), _Driver(response)))
        baseline = await ScreenOnlyArm().run(v, EnvHandle({}, Telemetry(), _Driver(response)))
        assert ladder_report == baseline
    saved = _Driver(ProductResponse(True, 200, "Saved"))
    rest = await EffectRestArm().run(v, EnvHandle({}, Telemetry(), saved, _Reader()))
    verified = await EffectVerifiedArm().run(v, EnvHandle({}, Telemetry(), saved, _Reader()))
    assert rest == verified
    with pytest.raises(TimeoutError):
        await ScreenOnlyArm().run(v, EnvHandle({}, Telemetry(), _Driver(TimeoutError("slow"))))


@pytest.mark.parametrize("arm", [EffectRestArm(), EffectFullArm()], ids=lambda a: a.name)
async def test_verifying_arms_fail_safe_without_their_read_path(arm: Any) -> None:
    v = view(task("ok"))
    driver = _Driver(ProductResponse(True, 200, "Saved"))
    report = await arm.run(v, EnvHandle({}, Telemetry(), driver))
    assert driver.calls == 1  # it acted
    assert not report.reported_success and report.halted and "cannot verify" in report.message


@pytest.mark.parametrize("arm", [EffectRestArm(), EffectFullArm()], ids=lambda a: a.name)
async def test_verifying_arms_fail_safe_on_an_undeclared_effect(
    ladder: MockMedLadderProvider, arm: Any
) -> None:
    t = task("ok")
    v = view(t, declared=False)
    ep = await ladder.provision(t, 0, v.params)
    try:
        report = await arm.run(v, ep.env)
        post = await ep.oracle.read()
    finally:
        await ep.teardown()
    assert not report.reported_success and report.halted
    assert len(post.rows("encounters")) == 1  # it did act


async def test_effect_rest_halts_on_what_its_readback_shows() -> None:
    v = view(task("ok"))
    driver = _Driver(ProductResponse(True, 200, "Saved"))
    report = await EffectRestArm().run(v, EnvHandle({}, Telemetry(), driver, _Reader()))
    assert not report.reported_success and report.halted and "ABSENT" in report.message
