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

__all__ = ["ResumeError", "ResumeState", "load_resume_state"]


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
