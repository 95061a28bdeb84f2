"""Unit tests of the example provider: its faults, its oracle, its isolation."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from effectbench_example_notes import BODY_LIMIT, TASKS, NotesOracle, NotesProvider
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from effectbench.model import (
    Category,
    ParamRef,
    Snapshot,
    TaskSpec,
    TrueState,
    VerdictStatus,
    resolve_value,
    trial_params,
)
from effectbench.provider import BenchmarkProvider, EnvHandle, ProvisionedEpisode
from effectbench.run.registry import Registry
from effectbench.scoring.judge import judge

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[NotesProvider]:
    p = NotesProvider(workdir=tmp_path)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


def task(task_id: str) -> TaskSpec:
    return next(t for t in TASKS if t.task_id == task_id)


def solution(t: TaskSpec, params: dict[str, str]) -> dict[str, str | int | float | bool | None]:
    assert t.solution is not None
    return {k: resolve_value(v, params) for k, v in t.solution.items()}


async def act(
    p: NotesProvider, task_id: str, trial: int = 0
) -> tuple[ProvisionedEpisode, Snapshot, Snapshot, bool]:
    """Provision, read, submit the solution once, read again: what screen_only does."""
    t = task(task_id)
    params = trial_params(t, trial)
    ep = await p.provision(t, trial, params)
    pre = await ep.oracle.read()
    assert ep.env.driver is not None
    response = await ep.env.driver.submit(solution(t, params))
    post = await ep.oracle.read()
    return ep, pre, post, response.screen_says_saved


def test_tasks_are_two_categories_with_trial_unique_payloads() -> None:
    assert {t.category for t in TASKS} == {Category.CONTROL, Category.C1_PARTIAL_SAVE}
    assert len({t.task_id for t in TASKS}) == len(TASKS)
    for t in TASKS:
        assert t.solution == {"title": ParamRef("title"), "body": ParamRef("body")}
        assert trial_params(t, 0) != trial_params(t, 1)
        # the fault must bite: the body is longer than what the clipping column keeps
        assert len(trial_params(t, 0)["body"]) > BODY_LIMIT


def test_is_a_benchmark_provider_and_registered_under_its_name() -> None:
    assert isinstance(NotesProvider(), BenchmarkProvider)
    loaded = Registry().provider("example-notes")
    assert isinstance(loaded, NotesProvider)
    assert loaded.name == "example-notes"


async def test_control_saves_the_full_note_and_says_so(provider: NotesProvider) -> None:
    ep, pre, post, saved = await act(provider, "notes::save")
    params = trial_params(task("notes::save"), 0)
    assert saved
    assert pre.readable and [r["title"] for r in pre.rows("notes")] == ["welcome"]
    assert {"title": params["title"], "body": params["body"]}.items() <= dict(
        post.rows("notes")[-1]
    ).items()
    verdict = judge(task("notes::save").expected_effect.resolve(params), pre, post)
    assert verdict.status is VerdictStatus.CONFIRMED
    await ep.teardown()


async def test_clipped_stores_a_cut_body_but_the_screen_says_saved(provider: NotesProvider) -> None:
    ep, pre, post, saved = await act(provider, "notes::clipped")
    params = trial_params(task("notes::clipped"), 0)
    assert saved, "the fault is silent: the screen must still claim success"
    stored = post.rows("notes")[-1]
    assert stored["title"] == params["title"]
    assert stored["body"] == params["body"][:BODY_LIMIT] != params["body"]
    verdict = judge(task("notes::clipped").expected_effect.resolve(params), pre, post)
    assert (verdict.status, verdict.true_state) == (
        VerdictStatus.REFUTED,
        TrueState.WRONG_PERSISTED,
    )
    await ep.teardown()


async def test_product_readback_agrees_with_the_oracle_but_is_not_it(
    provider: NotesProvider,
) -> None:
    ep, _, post, _ = await act(provider, "notes::clipped")
    verifier = ep.env.product_effect_verifier()
    assert verifier is not None and verifier is not ep.oracle
    mine = await verifier.read()
    assert mine.readable and mine.rows("notes") == post.rows("notes")
    await ep.teardown()


async def test_arm_handle_holds_no_oracle(provider: NotesProvider) -> None:
    t = task("notes::save")
    ep = await provider.provision(t, 0, trial_params(t, 0))
    env = ep.env
    assert isinstance(env, EnvHandle)
    reachable = [env.channels, env.telemetry, env.driver, env.verifier, *env.channels.values()]
    assert not any(isinstance(x, NotesOracle) for x in reachable)
    assert not any(
        isinstance(v, NotesOracle) for x in (env.driver, env.verifier) for v in vars(x).values()
    )
    await ep.teardown()


async def test_oracle_connection_cannot_write(provider: NotesProvider) -> None:
    t = task("notes::save")
    ep = await provider.provision(t, 0, trial_params(t, 0))
    assert isinstance(ep.oracle, NotesOracle)
    conn = ep.oracle.connect()
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("INSERT INTO notes (title, body) VALUES ('x', 'y')")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM notes")
    finally:
        conn.close()
    assert [r["title"] for r in (await ep.oracle.read()).rows("notes")] == ["welcome"]
    await ep.teardown()


async def test_oracle_reports_unreadable_instead_of_raising(
    provider: NotesProvider, tmp_path: Path
) -> None:
    missing = await NotesOracle(tmp_path / "never-created.sqlite").read()
    assert not missing.readable and missing.error
    assert not (tmp_path / "never-created.sqlite").exists(), (
        "a read-only oracle must not create the store"
    )
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    assert not (await NotesOracle(garbage).read()).readable
    t = task("notes::save")
    ep = await provider.provision(t, 0, trial_params(t, 0))
    await ep.teardown()
    await ep.teardown()  # idempotent
    assert not (await ep.oracle.read()).readable


async def test_concurrent_episodes_of_one_trial_are_isolated(provider: NotesProvider) -> None:
    results: list[tuple[ProvisionedEpisode, Snapshot]] = []

    async def one(task_id: str) -> None:
        ep, _, post, _ = await act(provider, task_id, trial=3)
        results.append((ep, post))

    async with anyio.create_task_group() as tg:
        for task_id in ["notes::save", "notes::save", "notes::clipped", "notes::clipped"]:
            tg.start_soon(one, task_id)
    assert len(results) == 4
    for ep, post in results:
        # each episode sees the seed row plus exactly its own note, never a neighbour's
        assert [r["id"] for r in post.rows("notes")] == [1, 2]
        await ep.teardown()


async def test_stop_removes_every_episode_file(tmp_path: Path) -> None:
    p = NotesProvider(workdir=tmp_path)
    await p.start()
    t = task("notes::save")
    await p.provision(t, 0, trial_params(t, 0))
    assert any(tmp_path.rglob("notes.sqlite"))
    await p.stop()
    assert not any(tmp_path.iterdir())
    with pytest.raises(RuntimeError, match="start"):
        await p.provision(t, 0, trial_params(t, 0))


async def test_driver_rejects_a_submission_without_a_title(provider: NotesProvider) -> None:
    t = task("notes::save")
    ep = await provider.provision(t, 0, trial_params(t, 0))
    assert ep.env.driver is not None
    response = await ep.env.driver.submit({"body": "no title"})
    assert not response.screen_says_saved
    assert len((await ep.oracle.read()).rows("notes")) == 1
    await ep.teardown()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    title=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40),
    body=st.text(st.characters(exclude_categories=("Cs",)), max_size=60),
)
def test_arbitrary_text_round_trips_exactly_in_control(
    tmp_path: Path, title: str, body: str
) -> None:
    """What an arm types is untrusted: quotes, NULs and SQL must land as literal text."""

    async def main() -> None:
        p = NotesProvider(workdir=tmp_path)
        await p.start()
        t = task("notes::save")
        ep = await p.provision(t, 0, trial_params(t, 0))
        assert ep.env.driver is not None
        assert (await ep.env.driver.submit({"title": title, "body": body})).screen_says_saved
        rows = (await ep.oracle.read()).rows("notes")
        assert (rows[-1]["title"], rows[-1]["body"]) == (title, body)
        await p.stop()

    anyio.run(main)
