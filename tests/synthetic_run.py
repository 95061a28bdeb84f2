"""Test helpers shared by several test modules (moved from test_artifacts.py)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from effectbench.core.codec import converter
from effectbench.core.events import (
    ArmStarted,
    ArmTelemetry,
    EpisodeFailed,
    EpisodeFinished,
    EpisodePlanned,
    EpisodeProvisioned,
    PostRead,
    PreSnapshot,
    Reported,
    RunFinished,
    RunStarted,
    event_data,
)
from effectbench.core.hashing import content_hash
from effectbench.core.model import (
    Category,
    Effect,
    FieldEquals,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Snapshot,
    TaskSpec,
)
from effectbench.log.reader import LogEntry, write_events_sync
from effectbench.run.plan import Plan, ProviderInfo, build_plan, episodes


def make_task(
    task_id: str, category: str = "control", substrate: str = "web", available: bool = True
) -> TaskSpec:
    return TaskSpec(
        task_id=task_id,
        title=task_id,
        substrate=substrate,
        category=Category(category),
        goal="Record the triage note for the patient.",
        expected_effect=Effect(
            RecordWritten(table="notes", selector={"patient": "p1", "body": ParamRef("body")}),
            (FieldEquals("status", "final"),),
        ),
        oracle=OracleSpec(tables=("notes",)),
        correct_action_available=available,
        params={"body": "triage {tag}"},
    )


TASKS = (
    make_task("c1-save", "C1_partial_save"),
    make_task("c2-dup", "C2_duplicate_submission"),
    make_task("ctl-ok", "control"),
    make_task("ctl-none", "control", available=False),
)


Scenario = str


def default_scenario(arm: str, task: TaskSpec, trial: int) -> Scenario:
    if arm == "screen_only":
        table = {
            "c1-save": ["wrong_field", "success", "wrong_field"],
            "c2-dup": ["duplicate", "duplicate", "success"],
            "ctl-ok": ["success", "success", "fail_env"],
            "ctl-none": ["phantom", "phantom", "phantom"],
        }
    else:
        table = {
            "c1-save": ["over_halt", "success", "over_halt"],
            "c2-dup": ["false_abort", "success", "success"],
            "ctl-ok": ["success", "unreadable", "success"],
            "ctl-none": ["over_halt", "over_halt", "over_halt"],
        }
    return table[task.task_id][trial % 3]


def _row(body: str, status: str = "final", id_: int = 1) -> dict[str, Any]:
    return {"id": id_, "patient": "p1", "body": body, "status": status}


def episode_events(spec: Any, scenario: Scenario, trial_ms: float) -> list[LogEntry]:
    ep = spec.episode_id
    body = spec.params["body"]
    pre = Snapshot(True, {"notes": ()})
    post_rows: tuple[dict[str, Any], ...] = ()
    reported = True
    if scenario in ("success", "false_abort"):
        post_rows = (_row(body),)
    elif scenario == "duplicate":
        post_rows = (_row(body), _row(body, id_=2))
    elif scenario == "wrong_field":
        post_rows = (_row(body, status="draft"),)
    if scenario in ("over_halt", "false_abort"):
        reported = False
    task = spec.task
    out: list[LogEntry] = [
        (
            EpisodePlanned.TYPE,
            event_data(
                EpisodePlanned(
                    arm=spec.arm,
                    task_id=task.task_id,
                    trial=spec.trial,
                    params=dict(spec.params),
                    category=task.category.value,
                    substrate=task.substrate.value,
                    split=task.split.value,
                    reversible=task.reversible,
                    effect_declared=task.effect_declared,
                    correct_action_available=task.correct_action_available,
                    effect=converter.unstructure(spec.effect),
                    effect_hash=content_hash(spec.effect),
                )
            ),
            ep,
        ),
        (EpisodeProvisioned.TYPE, event_data(EpisodeProvisioned(setup_ms=2.0 + trial_ms)), ep),
    ]
    if scenario == "fail_env":
        out.append(
            (
                EpisodeFailed.TYPE,
                {"failure_class": "environment", "stage": "provision", "error": "boom"},
                ep,
            )
        )
        return out
    out += [
        (
            PreSnapshot.TYPE,
            event_data(PreSnapshot(attempt=0, snapshot=converter.unstructure(pre))),
            ep,
        ),
        (ArmStarted.TYPE, {}, ep),
        (
            ArmTelemetry.TYPE,
            event_data(
                ArmTelemetry(
                    model_calls=2, input_tokens=100, output_tokens=20, cost_usd=0.01, actions=3
                )
            ),
            ep,
        ),
        (
            Reported.TYPE,
            event_data(
                Reported(
                    reported_success=reported, halted=not reported, message="", wall_ms=trial_ms
                )
            ),
            ep,
        ),
    ]
    if scenario == "unfinished":
        return out
    post = (
        Snapshot.unreadable("database locked")
        if scenario == "unreadable"
        else Snapshot(True, {"notes": post_rows})
    )
    out.append(
        (PostRead.TYPE, event_data(PostRead(attempt=0, snapshot=converter.unstructure(post))), ep)
    )
    out.append((EpisodeFinished.TYPE, {}, ep))
    return out


def make_plan(arms: Sequence[str] = ("screen_only", "effect_verified"), trials: int = 3) -> Plan:
    return build_plan(
        ProviderInfo("synthetic", "0.1", "effectbench-tests"), TASKS, list(arms), trials
    )


def write_run(
    run_dir: Path,
    plan: Plan | None = None,
    scenario: Callable[[str, TaskSpec, int], Scenario] = default_scenario,
    concurrency: int = 1,
    seed: int = 0,
) -> Path:
    """A run log whose episodes interleave like ``concurrency`` workers would, in seeded order."""
    plan = plan or make_plan()
    run_dir.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    entries: list[LogEntry] = [
        (
            RunStarted.TYPE,
            {
                "run_id": "run-test",
                "plan": plan.to_json(),
                "plan_hash": plan.plan_hash,
                "versions": dict(plan.versions),
                "concurrency": concurrency,
            },
            None,
        )
    ]
    pending: list[Iterator[LogEntry]] = []
    specs = list(episodes(plan))
    active: list[Iterator[LogEntry]] = []
    while specs or active:
        while specs and len(active) < concurrency:
            spec = specs.pop(0)
            ms = 100.0 + rnd.random() * 50 * concurrency
            active.append(iter(episode_events(spec, scenario(spec.arm, spec.task, spec.trial), ms)))
        it = active[rnd.randrange(len(active))] if concurrency > 1 else active[0]
        nxt = next(it, None)
        if nxt is None:
            active.remove(it)
        else:
            entries.append(nxt)
    del pending
    entries.append(
        (
            RunFinished.TYPE,
            {"interrupted": False, "episodes_finished": 0, "episodes_failed": 0},
            None,
        )
    )
    write_events_sync(run_dir / "events.jsonl", entries, ts=1_700_000_000.0)
    return run_dir


def read_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run_dir / "results.jsonl").read_bytes().splitlines()]
