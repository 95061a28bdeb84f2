"""The MockMed diff pack over real HTTP and SQLite: updates, deletes, two tables, the
differential reference, and the audit's attacks on diff tasks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import orjson
import pytest
from effectbench_mockmed.packs_diff import ALLOW, TASKS, MockMedDiffProvider

from effectbench.api import evaluate_provider_async
from effectbench.audit.checks import AuditReport
from effectbench.audit.runner import audit_provider
from effectbench.core.events import ReferencePostRead, ReferencePreSnapshot
from effectbench.core.model import DiffEffect, TaskSpec
from effectbench.log.reader import read_log
from effectbench.outputs.artifacts import build_artifacts
from effectbench.verify.run_check import verify_run

EXPECTED = {
    "allergy-ok": "CORRECT",
    "allergy-stale": "WRONG_PERSISTED",
    "allergy-homonym": "WRONG_PERSISTED",
    "retract-ok": "CORRECT",
    "retract-wrong_row": "WRONG_PERSISTED",
    "retract-noop": "WRONG_PERSISTED",
    "visit-ok": "CORRECT",
    "visit-partial": "WRONG_PERSISTED",
    "visit-stale": "WRONG_PERSISTED",
    "allergy-ref-ok": "CORRECT",
    "visit-ref-ok": "CORRECT",
}


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run_dir / "results.jsonl").read_bytes().splitlines()]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("diff") / "run"

    async def go() -> None:
        await evaluate_provider_async(
            ["screen_only", "effect_verified"], "mockmed-diff", trials=2, out=out
        )

    anyio.run(go)
    return out


def test_every_task_is_judged_as_its_fault_makes_it(run: Path) -> None:
    for row in _rows(run):
        name = row["task_id"].removeprefix("mockmed-diff::")
        assert row["true_state"] == EXPECTED[name], (row["episode_id"], row["verdict_reasons"])
    by_arm = {(r["arm"], r["task_id"]): r for r in _rows(run)}
    partial = by_arm[("screen_only", "mockmed-diff::visit-partial")]
    assert partial["outcome"] == "SILENT_WRONG_EFFECT"
    assert "missing change in 'billing'" in partial["verdict_reasons"][0]
    stale = by_arm[("screen_only", "mockmed-diff::allergy-stale")]
    assert "phone changed from '555-0199' to '555-0100'" in stale["verdict_reasons"][0]
    assert all(
        r["outcome"] != "SILENT_WRONG_EFFECT" for r in _rows(run) if r["arm"] == "effect_verified"
    )


def test_reference_tasks_log_the_twin_reads_in_the_agents_episode(run: Path) -> None:
    seen: dict[str, set[str]] = {}
    for ev in read_log(run / "events.jsonl"):
        if ev.ep is not None and ev.type in (ReferencePreSnapshot.TYPE, ReferencePostRead.TYPE):
            seen.setdefault(ev.ep, set()).add(ev.type)
            assert ev.data["arm"] == "oracle"
    ref_eps = {r["episode_id"] for r in _rows(run) if "-ref-" in r["task_id"]}
    assert set(seen) == ref_eps and len(ref_eps) == 8
    assert all(len(types) == 2 for types in seen.values())


def test_rescore_needs_no_environment_and_verifies(run: Path, tmp_path: Path) -> None:
    before = (run / "results.jsonl").read_bytes()
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "events.jsonl").write_bytes((run / "events.jsonl").read_bytes())
    build_artifacts(copy)
    assert (copy / "results.jsonl").read_bytes() == before
    report = verify_run(run)
    assert report.ok, report


# --------------------------------------------------------------------------- the audit


def _audit(provider: Any, out: Path) -> AuditReport:
    async def go() -> AuditReport:
        return await audit_provider(provider, out_dir=out, trials=1, concurrency=8)

    return anyio.run(go)


@pytest.fixture(scope="module")
def audit(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    return _audit("mockmed-diff", tmp_path_factory.mktemp("audit") / "a")


def test_the_diff_pack_audits_and_its_adversaries_attacked(audit: AuditReport) -> None:
    assert [t.status for t in audit.tasks] == ["audited"] * len(TASKS), [
        (t.task_id, t.reasons) for t in audit.tasks if t.status != "audited"
    ]
    assert {"extra_change", "partial_diff"} <= set(audit.arms)
    states: dict[tuple[str, str], str | None] = {}
    for line in (audit.log_path.parent / "results.jsonl").read_bytes().splitlines():
        row = orjson.loads(line)
        states[(row["arm"], row["task_id"])] = row["true_state"]
    for task in ("visit-ok", "retract-ok", "allergy-ok"):
        tid = f"mockmed-diff::{task}"
        assert states[("extra_change", tid)] == "WRONG_PERSISTED"
        assert states[("wrong_field", tid)] == "WRONG_PERSISTED"
    assert states[("partial_diff", "mockmed-diff::visit-ok")] == "WRONG_PERSISTED"
    assert states[("partial_diff", "mockmed-diff::retract-ok")] == "WRONG_PERSISTED"


class _Variant(MockMedDiffProvider):
    """The diff pack with one task swapped for a variant."""

    def __init__(self, tasks: Sequence[TaskSpec]) -> None:
        super().__init__()
        self._tasks = tuple(tasks)

    def tasks(self) -> Sequence[TaskSpec]:
        return self._tasks


def _task(task_id: str) -> TaskSpec:
    return next(t for t in TASKS if t.task_id == task_id)


def test_a_weak_diff_task_whose_allow_list_hides_the_reason_is_caught(tmp_path: Path) -> None:
    retract = _task("mockmed-diff::retract-ok")
    effect = retract.expected_effect
    assert isinstance(effect, DiffEffect)
    # the naive contract: the delete only, with every audit row allowed (the reason hidden)
    naive = attrs.evolve(effect, changes=effect.changes[:1], allow=ALLOW)
    weak = attrs.evolve(retract, expected_effect=naive)
    report = _audit(_Variant([weak]), tmp_path / "weak")
    [task] = report.tasks
    assert task.status == "gameable", task.reasons
    assert any("adversary wrong_field" in r for r in task.reasons)


def test_a_reference_program_that_changes_nothing_is_caught(tmp_path: Path) -> None:
    ref = _task("mockmed-diff::allergy-ref-ok")
    inert = attrs.evolve(ref, solution={"action": "look_only"})  # the product refuses it
    report = _audit(_Variant([inert]), tmp_path / "inert")
    [task] = report.tasks
    assert task.status == "broken", task.reasons
    assert "reference did not reach the correct effect" in task.reasons[0]


@pytest.mark.anyio
async def test_stop_tears_down_an_episode_left_live_as_the_other_providers_do(
    tmp_path: Path,
) -> None:
    """The shared episode shape: stop() ends every live episode (its session, its oracle,
    its file), and the episode's own teardown afterwards is a no-op."""
    from effectbench.core.model import trial_params

    provider = MockMedDiffProvider(tmp_root=tmp_path)
    await provider.start()
    try:
        task = TASKS[0]
        ep = await provider.provision(task, 0, trial_params(task, 0))
        assert (await ep.oracle.read()).readable
    finally:
        await provider.stop()
    after = await ep.oracle.read()
    assert not after.readable and "torn down" in (after.error or ""), after
    await ep.teardown()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.anyio
async def test_charts_go_under_the_run_state_root_the_harness_hands_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like MockMed's: with ``use_state_dir`` the charts live under the harness's per-run
    root (which the next run or resume of a killed run empties), not in /dev/shm."""
    from effectbench.core.model import trial_params

    monkeypatch.delenv("EFFECTBENCH_MOCKMED_TMPDIR", raising=False)
    state = tmp_path / "state"
    state.mkdir()
    provider = MockMedDiffProvider()
    provider.use_state_dir(state)
    await provider.start()
    try:
        ep = await provider.provision(TASKS[0], 0, trial_params(TASKS[0], 0))
        assert [p for p in state.rglob("*") if p.is_file()], "no chart under the state root"
        await ep.teardown()
    finally:
        await provider.stop()
    assert list(state.iterdir()) == []
