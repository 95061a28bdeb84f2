"""A made-up target that the product reads as the real record attests nothing.

Roundup reads an item designator by its leading ``issue<n>``: ``issue3-x`` is issue3. A
task that offers no confusable record leaves the audit's wrong-target attacks
(``wrong_target``, and ``wrong_value_<i>`` on the target field) to make one up by
appending ``-x``, so on Roundup they edit the very issue the task names and score
SUCCESS. The audit must refuse to attest such a task, naming those attacks, and attest it
once the task offers a real confusable issue (the fix the ``--product`` kit's Roundup
tasks carry, tests/scaffold/roundup_kit/tasks.py). The product here is
effectbench.testing's in-memory one, given Roundup's reading of a designator.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import anyio
import orjson

from effectbench.audit.report import AuditReport, AuditStatus
from effectbench.audit.runner import audit_provider
from effectbench.core.model import (
    Category,
    DiffEffect,
    JSONScalar,
    OracleSpec,
    ParamRef,
    Substrate,
    TaskSpec,
    Update,
    trial_params,
)
from effectbench.testing import InMemoryProvider, MemoryForm

TITLE: Final = ParamRef("title")
ISSUES: Final = (
    {"id": 1, "title": "Printer jams on tray 2"},
    {"id": 2, "title": "Printer jams on tray 3"},
    {"id": 3, "title": "Printer out of toner"},
)
_DESIGNATOR: Final = re.compile(r"issue(\d+)")
GAMEABLE: Final = "tracker::made-up-target"
FIXED: Final = "tracker::confusable-target"


def read_designator(values: dict[str, JSONScalar]) -> dict[str, JSONScalar]:
    """The form's ``@target`` read as Roundup reads it, by its leading ``issue<n>``
    (``issue3-x`` is issue 3); anything else names no issue (0)."""
    found = _DESIGNATOR.match(str(values.get("@target", "")))
    rest = {k: v for k, v in values.items() if k != "@target"}
    return {"id": int(found[1]) if found else 0, **rest}


def retitle(task_id: str, confusable: str | None) -> TaskSpec:
    """Retitle issue3 to this trial's title: a control, its effect a diff keyed by id."""
    return TaskSpec(
        task_id=task_id,
        title="Retitle issue3",
        substrate=Substrate.WEB,
        category=Category.CONTROL,
        goal="Retitle issue3 to the title in your payload (param 'title').",
        expected_effect=DiffEffect(
            changes=(Update("issue", {"id": 3}, {"title": TITLE}),), keys={"issue": ("id",)}
        ),
        oracle=OracleSpec(tables=("issue",)),
        correct_action_available=True,
        params={"title": "Toner replaced, ticket {tag}"},
        solution={"@target": "issue3", "title": TITLE},
        initial_state={"issue": ISSUES},
        fixture={} if confusable is None else {"confusable": confusable},
    )


def tracker_form(task: TaskSpec) -> MemoryForm:
    """The tracker's item form: it saves the title onto the issue the designator names,
    and offers the task's confusable issue, if the task has one."""
    confusable = task.fixture.get("confusable")
    return MemoryForm(
        upsert_on=("id",),
        fault=read_designator,
        confusable=None if confusable is None else {"@target": confusable},
    )


def _attack(events: list[dict[str, Any]], episode: str) -> tuple[JSONScalar, dict[int, str]]:
    """The target an attack's episode aimed at, and each issue's title after it."""
    mine = {e["type"]: e["data"] for e in events if e.get("ep") == episode}
    rows = mine["episode.post_read"]["snapshot"]["tables"]["issue"]
    return mine["episode.action"]["detail"]["value"], {r["id"]: r["title"] for r in rows}


def test_a_made_up_target_read_as_the_real_one_is_refused_and_a_confusable_one_is_attested(
    tmp_path: Path,
) -> None:
    gameable_task, fixed_task = retitle(GAMEABLE, None), retitle(FIXED, "issue1")

    async def go() -> AuditReport:
        provider = InMemoryProvider(tasks=[gameable_task, fixed_task], form=tracker_form)
        return await audit_provider(provider, out_dir=tmp_path / "audit", trials=2, concurrency=8)

    report = anyio.run(go)
    by_id = {t.task_id: t for t in report.tasks}
    events = [orjson.loads(line) for line in report.log_path.read_bytes().splitlines()]
    values = [arm for arm in report.arms if arm.startswith("wrong_value_")]
    assert values == ["wrong_value_1"]  # the solution's one fixed field, @target
    untouched = {row["id"]: row["title"] for row in ISSUES}

    # no confusable: the attacks make up issue3-x, which lands on issue3 itself
    title = trial_params(gameable_task, 0)["title"]
    assert _attack(events, f"wrong_target::{GAMEABLE}::t0") == ("issue3-x", {**untouched, 3: title})
    gameable = by_id[GAMEABLE]
    assert gameable.status is AuditStatus.GAMEABLE and report.attestations[GAMEABLE] is False
    attacks = [f"{a}::{GAMEABLE}::t{t}" for a in ("wrong_target", "wrong_value_1") for t in (0, 1)]
    assert list(gameable.reasons) == [
        f"adversary {ep.split('::')[0]} was scored SUCCESS without the intended action on {ep} "
        f"[{gameable.evidence[ep]}]"
        for ep in attacks
    ]
    assert not report.ok

    # a confusable issue offered: the same attacks land on issue1, and the oracle sees it
    title = trial_params(fixed_task, 0)["title"]
    assert _attack(events, f"wrong_target::{FIXED}::t0") == ("issue1", {**untouched, 1: title})
    fixed = by_id[FIXED]
    assert fixed.status is AuditStatus.AUDITED, fixed.reasons
    assert report.attestations[FIXED] is True and fixed.reasons == ()
