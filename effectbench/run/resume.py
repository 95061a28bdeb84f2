"""Resuming a run: what its log says (``ResumeState``) and how a resume request is
reconciled with it.

The scheduler only consumes a ``ResumeState``; reading one and deciding what a resume
may change (nothing of the plan; concurrency and the coverage threshold only when given)
lives here, so the API's ``execute`` stays a short pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from effectbench.core.errors import EffectBenchError
from effectbench.core.events import TERMINAL_TYPES, EpisodeAbandoned, RunResumed, RunStarted
from effectbench.core.rundir import LOG_FILE
from effectbench.run.options import RunOptions
from effectbench.run.plan import Plan, count_planned, diff_plans
from effectbench.run.request import RunError, RunRequest

__all__ = [
    "ResumeError",
    "ResumeState",
    "check_same_plan",
    "load_resume_state",
    "nothing_left",
    "open_resume",
    "reconcile",
]


@attrs.frozen
class ResumeState:
    """What a log says about a run: its plan, which episodes ended, which were cut off."""

    run_id: str
    plan: Mapping[str, Any]
    plan_hash: str
    terminated: frozenset[str]
    unterminated: tuple[str, ...]
    torn_tail: bool
    events: int = -1
    """Valid events read; a resume refuses a log that holds more by the time it is locked."""
    concurrency: int | None = None
    """The concurrency run.started recorded: a resume keeps it unless told otherwise."""
    min_coverage: float | None = None
    """The threshold the latest session recorded: a resume keeps it unless told otherwise."""


class ResumeError(EffectBenchError):
    """A log that cannot be resumed; the message says why, in one line."""


def load_resume_state(log_path: Path) -> ResumeState:
    """Read and verify a log; name the terminated and the started-but-unterminated episodes."""
    from effectbench.log.reader import read_log

    reader = read_log(log_path, verify=True)
    started: Mapping[str, Any] | None = None
    threshold: Any = None
    state: dict[str, bool] = {}  # ep -> terminated?
    for ev in reader:
        if ev.type == RunStarted.TYPE and started is None:
            started = ev.data
            threshold = started.get("min_coverage")
            continue
        if ev.type == RunResumed.TYPE and ev.ep is None:
            threshold = ev.data.get("min_coverage", threshold)
        ep = ev.ep
        if ep is None:
            continue
        if ev.type == EpisodeAbandoned.TYPE:
            state.pop(ep, None)
        elif ev.type in TERMINAL_TYPES:
            state[ep] = True
        elif not state.get(ep, False):
            state[ep] = False
    if started is None and reader.count == 0:
        raise ResumeError(
            f"{log_path} holds no complete event: the run was stopped before it started and "
            f"nothing ran; start it again with --out {log_path.parent} --force"
        )
    if started is None:
        raise ResumeError(
            f"{log_path} has no run.started event; it is not a run log that can be resumed"
        )
    return ResumeState(
        run_id=str(started["run_id"]),
        plan=started["plan"],
        plan_hash=str(started["plan_hash"]),
        terminated=frozenset(ep for ep, done in state.items() if done),
        unterminated=tuple(ep for ep, done in state.items() if not done),
        torn_tail=bool(getattr(reader, "torn_tail", False)),
        events=reader.count,
        concurrency=started.get("concurrency")
        if isinstance(started.get("concurrency"), int)
        else None,
        min_coverage=float(threshold)
        if isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
        else None,
    )


def open_resume(run_dir: Path | None) -> ResumeState | None:
    """The state of the run ``--resume`` names (None when not resuming), or a RunError
    that says what to give instead."""
    if run_dir is None:
        return None
    if run_dir.exists() and not run_dir.is_dir():
        raise RunError(
            f"--resume {run_dir} is a file, not a run directory; give the directory that "
            f"holds {LOG_FILE}"
        )
    if not run_dir.is_dir():
        raise RunError(f"run directory {run_dir} does not exist; check the path given to --resume")
    if not (run_dir / LOG_FILE).is_file():
        raise RunError(
            f"{run_dir} holds no {LOG_FILE}; it is not a run directory that can be resumed"
        )
    return load_resume_state(run_dir / LOG_FILE)


def reconcile(
    request: RunRequest, options: RunOptions, state: ResumeState | None
) -> tuple[RunRequest, RunOptions]:
    """What a resume runs: each plan input the request left open from the recorded plan,
    and the recorded concurrency and coverage threshold unless others were asked (the
    recorded concurrency so wins over a provider's recommendation). Then every field
    still open from ``DEFAULTS``."""
    if state is None:
        return request.settled(), options
    if options.asked_concurrency is None and state.concurrency:
        options = attrs.evolve(options, concurrency=state.concurrency)
    if options.asked_min_coverage is None and state.min_coverage is not None:
        options = attrs.evolve(options, min_coverage=state.min_coverage)
    recorded = state.plan
    refs = recorded.get("refs") or {}
    names = list(recorded.get("arms") or [])
    arm_refs = refs.get("arms") or []
    filled = attrs.evolve(
        request,
        provider=_given(
            request.provider, refs.get("provider") or (recorded.get("provider") or {}).get("name")
        ),
        arms=_given(request.arms, [r or n for r, n in zip(arm_refs, names)] or names),
        trials=_given(request.trials, int(recorded.get("trials") or 0)),
        task_globs=_given(request.task_globs, list(recorded.get("task_globs") or [])),
        limit=_limit(request, recorded.get("limit")),
    )
    if filled.provider is None or not filled.arms:
        raise RunError(
            f"{(request.resume or Path()) / LOG_FILE} records no provider or arms; pass "
            "--provider and --arm"
        )
    return filled.settled(), options


def _given(asked: Any, recorded: Any) -> Any:
    return recorded if asked is None else asked


def _limit(request: RunRequest, recorded: Any) -> int | None:
    """The recorded ``--limit``; one given on the resume must be the same."""
    kept = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None
    if request.limit is not None and request.limit != kept:
        was = "no --limit" if kept is None else f"--limit {kept}"
        keep = "drop --limit" if kept is None else f"drop --limit or give --limit {kept}"
        raise RunError(
            f"refusing to resume {request.resume}: it was run with {was}, not --limit "
            f"{request.limit}; {keep}, or start a new run with --out"
        )
    return kept


def check_same_plan(plan: Plan, state: ResumeState, run_dir: Path) -> None:
    """A resume runs the recorded plan or nothing: a RunError naming what differs."""
    if plan.plan_hash != state.plan_hash:
        diffs = diff_plans(state.plan, plan.identity()) or ["the plan hash differs"]
        raise RunError(f"refusing to resume {run_dir}: the plan differs ({'; '.join(diffs)})")


def nothing_left(plan: Plan, state: ResumeState) -> bool:
    """Whether every planned episode already ended (and none was cut off)."""
    return not state.unterminated and count_planned(plan, state.terminated) == plan.n_episodes
