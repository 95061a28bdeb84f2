"""Reference-mode diffs beyond the run itself (issue 14's left-over gaps): a leaderboard
submission re-scores them as the run did, the out-of-process effect_verified agents
judge diffs as the in-process arm does, and effect_verified on a reference-mode task.

One real run of the ``mockmed-diff`` pack (real HTTP, real SQLite, the reference
program on a real twin) serves every test here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import orjson
import pytest
from effectbench_mockmed.diff_product import FAULTS, ChartStore, build_template
from effectbench_mockmed.packs_diff import TASKS, MockMedDiffProvider

from effectbench.agents.reference import PYTHON_AGENT
from effectbench.api import evaluate_provider_async
from effectbench.arms.own_change import own_change
from effectbench.core.arm import TaskView
from effectbench.core.codec import converter
from effectbench.core.model import DiffEffect, Snapshot, TaskSpec
from effectbench.scoring.diff import judge_diff
from effectbench.verify.export import export_submission
from effectbench.verify.submission import verify_submission

ARMS = ("screen_only", "effect_verified", "py_effect_verified", "node_effect_verified")
REF_TASKS = ("mockmed-diff::allergy-ref-ok", "mockmed-diff::visit-ref-ok")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("refmode") / "run"

    async def go() -> None:
        await evaluate_provider_async(list(ARMS), "mockmed-diff", trials=2, out=out)

    anyio.run(go)
    return out


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run_dir / "results.jsonl").read_bytes().splitlines()]


def _labels(run_dir: Path, arm: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {
        (r["task_id"], r["trial"]): (r["true_state"], r["outcome"], r["failure_class"])
        for r in _rows(run_dir)
        if r["arm"] == arm
    }


# --------------------------------------------------------------------------- submissions


@pytest.mark.parametrize("system", ["screen_only", "effect_verified"])
def test_a_reference_mode_run_exports_and_verifies_with_its_labels(
    run: Path, tmp_path: Path, system: str
) -> None:
    path = export_submission(run, system, tmp_path / "submission.json")
    report = verify_submission(path)
    assert report.ok, report.reasons
    doc = orjson.loads(path.read_bytes())
    ref_rows = [r for r in doc["rows"] if r["task_id"] in REF_TASKS]
    assert len(ref_rows) == 4
    for row in ref_rows:
        assert row["true_state"] == "CORRECT"
        assert row["reference"]["program"] == "oracle"
        assert row["reference"]["pre_snapshot"]["readable"] is True
        assert row["reference"]["post_snapshot"]["readable"] is True
    assert all("reference" not in r for r in doc["rows"] if r["task_id"] not in REF_TASKS)


def _edited(run: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> list[str]:
    path = export_submission(run, "screen_only", tmp_path / "submission.json")
    doc = orjson.loads(path.read_bytes())
    change(doc)
    path.write_bytes(orjson.dumps(doc))
    report = verify_submission(path)
    assert not report.ok
    return report.reasons


def _ref_row(doc: dict[str, Any], task_id: str = REF_TASKS[0]) -> dict[str, Any]:
    return next(r for r in doc["rows"] if r["task_id"] == task_id)


def test_a_tampered_twin_read_is_caught(run: Path, tmp_path: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        # the twin "did" nothing to the allergy: the agent's correct update is now extra
        twin_post = _ref_row(doc)["reference"]["post_snapshot"]
        for patient in twin_post["tables"]["patients"]:
            if patient["id"] == "p1":
                patient["allergy"] = "none known"
                patient["updated_at"] = 1

    reasons = _edited(run, tmp_path, change)
    assert any("true_state claimed 'CORRECT', re-derived 'WRONG_PERSISTED'" in r for r in reasons)
    assert any("outcome claimed 'SUCCESS', re-derived 'SILENT_WRONG_EFFECT'" in r for r in reasons)


def test_stripped_twin_reads_are_a_reason(run: Path, tmp_path: Path) -> None:
    reasons = _edited(run, tmp_path, lambda doc: _ref_row(doc).pop("reference"))
    assert any("carries no twin reads" in r for r in reasons), reasons


def test_twin_reads_of_another_program_are_a_reason(run: Path, tmp_path: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        _ref_row(doc)["reference"]["program"] = "screen_only"

    reasons = _edited(run, tmp_path, change)
    assert any("not the task's reference program 'oracle'" in r for r in reasons), reasons


def test_twin_reads_on_a_declared_diff_row_are_a_reason(run: Path, tmp_path: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        ok = _ref_row(doc, "mockmed-diff::allergy-ok")
        ok["reference"] = _ref_row(doc)["reference"]

    reasons = _edited(run, tmp_path, change)
    assert any("nothing would check them" in r for r in reasons), reasons


def test_malformed_twin_reads_are_a_reason(run: Path, tmp_path: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        _ref_row(doc)["reference"]["post_snapshot"] = {"readable": "sometimes"}

    reasons = _edited(run, tmp_path, change)
    assert any("oracle readings are malformed" in r for r in reasons), reasons


# --------------------------------------------------------------------------- effect_verified


def test_effect_verified_claims_a_correct_reference_mode_save(run: Path) -> None:
    labels = _labels(run, "effect_verified")
    for task_id in REF_TASKS:
        for trial in (0, 1):
            assert labels[(task_id, trial)] == ("CORRECT", "SUCCESS", None), task_id
    assert all(outcome != "SILENT_WRONG_EFFECT" for _, outcome, _ in labels.values())


def _chart(tmp_path: Path, fault: str, task_id: str) -> tuple[TaskView, Snapshot, Snapshot]:
    """One real save on MockMed's chart under ``fault``: the task view (the reference-mode
    task's: the diff's keys and allow-list only) and the product's state around it."""
    task = next(t for t in TASKS if t.task_id == task_id)
    reference = next(t for t in TASKS if t.task_id == REF_TASKS[0]).expected_effect
    view = TaskView.of(task, 0, episode_id=f"x::{task_id}::t0")
    view = attrs.evolve(view, effect=attrs.evolve(reference, allow=_allow(task)))
    template = tmp_path / "template.db"
    build_template(template)
    store = ChartStore(tmp_path / "ep.db", template, fault)
    try:
        before = _snap(store.state())
        assert view.solution is not None
        store.act({k: "" if v is None else str(v) for k, v in view.solution.items()})
        return view, before, _snap(store.state())
    finally:
        store.close()


def _allow(task: TaskSpec) -> tuple[str, ...]:
    assert isinstance(task.expected_effect, DiffEffect)
    return task.expected_effect.allow


def _snap(state: dict[str, list[dict[str, Any]]]) -> Snapshot:
    return Snapshot(readable=True, tables={t: tuple(rows) for t, rows in state.items()})


@pytest.mark.parametrize(
    ("task", "fault", "why"),
    [
        ("allergy-ok", "ok", None),
        ("visit-ok", "ok", None),
        ("retract-ok", "ok", None),
        ("allergy-stale", "stale", "fields it did not set changed: phone"),
        ("allergy-homonym", "homonym", "a row of 'patients' it did not name changed"),
        ("visit-partial", "partial", "what it submitted as amount, code is in no change"),
        ("visit-stale", "stale", "fields it did not set changed: phone"),
        ("retract-wrong_row", "wrong_row", "a row of 'encounters' it did not name is gone"),
    ],
)
def test_own_change_confirms_only_a_save_its_submission_accounts_for(
    tmp_path: Path, task: str, fault: str, why: str | None
) -> None:
    view, before, after = _chart(tmp_path, fault, f"mockmed-diff::{task}")
    assert isinstance(view.effect, DiffEffect)
    confirmed, reason = own_change(view.effect, view.solution, view.params, before, after)
    assert confirmed is (why is None), reason
    if why is not None:
        assert why in reason


def test_own_change_halts_on_an_untouched_or_unreadable_record(tmp_path: Path) -> None:
    view, before, _ = _chart(tmp_path, "ok", "mockmed-diff::allergy-ok")
    assert isinstance(view.effect, DiffEffect)
    args = (view.effect, view.solution, view.params)
    assert own_change(*args, before, before) == (False, "nothing changed in the readback")
    confirmed, reason = own_change(*args, before, Snapshot.unreadable("HTTP 500"))
    assert not confirmed and "unreadable: HTTP 500" in reason


def test_own_change_cannot_tell_a_noop_that_still_audits_it(tmp_path: Path) -> None:
    """The documented limit (docs/writing-an-arm.md): without the expected diff, a save
    whose only trace is an audit row naming the target and reason looks accounted for."""
    view, before, after = _chart(tmp_path, "noop", "mockmed-diff::retract-noop")
    assert isinstance(view.effect, DiffEffect)
    assert own_change(view.effect, view.solution, view.params, before, after)[0] is True


# --------------------------------------------------------------------------- the agents

AGENTS = ("py_effect_verified", "node_effect_verified")


@pytest.mark.parametrize("agent", AGENTS)
def test_the_agents_label_the_diff_pack_as_the_in_process_arm(run: Path, agent: str) -> None:
    want = _labels(run, "effect_verified")
    got = _labels(run, agent)
    assert got == want
    assert all(fc is None for _, _, fc in got.values())


class _Crossed(MockMedDiffProvider):
    """Every chart job under every fault, as a declared diff and as a reference-mode diff:
    cases the pack itself does not list, to hold the agents' ports to the arm's rules."""

    def tasks(self) -> Sequence[TaskSpec]:
        return CROSSED


def _crossed() -> tuple[TaskSpec, ...]:
    out = []
    for job in ("allergy", "retract", "visit"):
        base = next(t for t in TASKS if t.task_id == f"mockmed-diff::{job}-ok")
        declared = base.expected_effect
        assert isinstance(declared, DiffEffect)
        reference = attrs.evolve(declared, changes=(), mode="reference", reference="oracle")
        for fault in FAULTS:
            for tag, effect in (("declared", declared), ("ref", reference)):
                out.append(
                    attrs.evolve(
                        base,
                        task_id=f"crossed::{job}-{tag}-{fault}",
                        expected_effect=effect,
                        fixture={"mode": fault},
                    )
                )
    return tuple(out)


CROSSED = _crossed()


@pytest.fixture(scope="module")
def crossed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crossed") / "run"

    async def go() -> None:
        await evaluate_provider_async(["effect_verified", *AGENTS], _Crossed(), trials=1, out=out)

    anyio.run(go)
    return out


@pytest.mark.parametrize("agent", AGENTS)
def test_the_agents_decide_every_job_under_every_fault_as_the_arm(
    crossed: Path, agent: str
) -> None:
    want = _labels(crossed, "effect_verified")
    assert len(want) == len(CROSSED) == 36
    assert _labels(crossed, agent) == want
    # the cases are not all alike: the arm claims some and halts on others
    outcomes = {outcome for _, outcome, _ in want.values()}
    assert {"SUCCESS", "WRONG_ACTION", "FALSE_ABORT"} <= outcomes, outcomes


def test_the_python_port_of_the_diff_judge_agrees_with_the_judge(tmp_path: Path) -> None:
    """On the real chart's states of every declared job under every fault, forwards,
    untouched and backwards (a pre-state the declared change cannot start from)."""
    agent = _load_python_agent()
    seen = set()
    for n, task in enumerate(t for t in CROSSED if "-declared-" in t.task_id):
        effect = task.expected_effect
        assert isinstance(effect, DiffEffect)
        job = task.task_id.removeprefix("crossed::").split("-")[0]
        where = tmp_path / f"case{n}"
        where.mkdir()
        view, before, after = _chart(where, str(task.fixture["mode"]), f"mockmed-diff::{job}-ok")
        resolved = effect.resolve(view.params)
        plain = converter.unstructure(resolved)["diff"]
        for pre, post in ((before, after), (before, before), (after, before)):
            want = judge_diff(resolved, pre, post).true_state.value
            got = agent.judge_diff(plain, converter.unstructure(pre), converter.unstructure(post))
            assert got == want, (task.task_id, want, got)
            seen.add(want)
    assert {"CORRECT", "WRONG_PERSISTED", "ABSENT", "UNREADABLE"} <= seen, seen


def _load_python_agent() -> Any:
    spec = importlib.util.spec_from_file_location("ev_agent", PYTHON_AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
