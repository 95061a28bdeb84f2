"""Fold the event log into EpisodeRecords: judge and classify at fold time, from logged data only.

This is what makes rescoring possible: nothing here touches an environment, a clock or
a provider. The judge sees the logged pre-snapshot and post-read, the classifier sees
the logged report and the planned task facts.

Streaming contract (``project_episodes``):

- State is held only for episodes that have not yet terminated; a record is yielded
  the moment its terminal event (``episode.finished`` / ``episode.failed``) arrives and
  its state is dropped, so memory follows the number of in-flight episodes, never the
  number finished.
- An ``episode.abandoned`` event (written on resume) discards the attempt so far; the
  latest ``episode.planned`` event supplies the task facts to the rerun (the rerun
  may plan again; a new ``episode.planned`` also starts a fresh attempt).
- The scheduler never reruns a terminated episode. If a log nonetheless carries a
  second complete run of an episode (its own ``episode.planned`` through a terminal),
  a second record with the same ``episode_id`` is yielded; the later one wins for any
  consumer keyed by episode. An event for an episode with no ``episode.planned`` ahead
  of it in its buffer (e.g. a terminal after the terminal) raises ProjectionError:
  the log was not written by the scheduler's protocol and guessing would hide that.
- At end of stream every episode that never terminated is yielded as failed, class
  ``unknown``, reason "did not finish (run interrupted)", in first-seen order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import cattrs

from effectbench.classify import classify
from effectbench.codec import converter
from effectbench.events import (
    ArmTelemetry,
    EpisodeAbandoned,
    EpisodeFailed,
    EpisodeFinished,
    EpisodePlanned,
    EpisodeProvisioned,
    PostRead,
    PreSnapshot,
    Reported,
)
from effectbench.judge import judge
from effectbench.model import Category, Effect, FailureClass, Snapshot, Substrate, TrueState
from effectbench.records import EpisodeRecord, EpisodeTelemetry

__all__ = ["EventLike", "ProjectionError", "fold_episode", "project_episodes"]

LOG_NAME = "events.jsonl"
INTERRUPTED = "did not finish (run interrupted)"
_BAD_DATA = (KeyError, TypeError, ValueError, AttributeError, cattrs.BaseValidationError)


class ProjectionError(ValueError):
    """The log's events for one episode cannot be folded (protocol violation)."""


class EventLike(Protocol):
    """The part of effectbench.log.LoggedEvent the projection reads."""

    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def ep(self) -> str | None: ...
    @property
    def data(self) -> Mapping[str, Any]: ...


class _Episode:
    """The latest event of each kind for one episode's live attempt; cheap to update."""

    __slots__ = ("ep", "planned", "post", "pre", "provisioned", "reported", "telemetry", "terminal")

    def __init__(self, ep: str) -> None:
        self.ep = ep
        self.planned: EventLike | None = None
        self.provisioned: EventLike | None = None
        self.pre: EventLike | None = None
        self.telemetry: EventLike | None = None
        self.reported: EventLike | None = None
        self.post: EventLike | None = None
        self.terminal: EventLike | None = None

    def _reset(self) -> None:
        self.provisioned = self.pre = self.telemetry = None
        self.reported = self.post = self.terminal = None

    def add(self, event: EventLike) -> None:
        t = event.type
        if t == EpisodePlanned.TYPE:
            self.planned = event  # a (re-)planned episode starts a fresh attempt
            self._reset()
        elif self.planned is None:
            raise ProjectionError(
                f"episode {self.ep}: event #{event.seq} ({t}) has no episode.planned before it; "
                "either the log lost that event or the episode ran again after it terminated"
            )
        elif t == EpisodeAbandoned.TYPE:
            self._reset()
        elif t == EpisodeProvisioned.TYPE:
            self.provisioned = event
        elif t == PreSnapshot.TYPE:
            self.pre = event
        elif t == ArmTelemetry.TYPE:
            self.telemetry = event  # cumulative: the last report of the attempt wins
        elif t == Reported.TYPE:
            self.reported = event
        elif t == PostRead.TYPE:
            self.post = event
        elif t in (EpisodeFinished.TYPE, EpisodeFailed.TYPE):
            self.terminal = event  # the last terminal wins

    def record(self) -> EpisodeRecord:
        if self.planned is None:
            raise ProjectionError(f"episode {self.ep}: no episode.planned event")
        return _fold(self)


def _ref(event: EventLike | None) -> str | None:
    return None if event is None else f"{LOG_NAME}#{event.seq}"


def _num(data: Mapping[str, Any] | None, key: str) -> Any:
    return None if data is None else data.get(key)


def _snapshot(event: EventLike | None, what: str) -> Snapshot:
    if event is None:
        return Snapshot.unreadable(f"no {what} event in the live attempt")
    try:
        return converter.structure(event.data["snapshot"], Snapshot)
    except _BAD_DATA as exc:  # logged data is untrusted: a bad snapshot is unreadable
        return Snapshot.unreadable(f"malformed snapshot in event #{event.seq}: {exc}")


def _fold(st: _Episode) -> EpisodeRecord:
    assert st.planned is not None
    p = st.planned.data
    tel = st.telemetry.data if st.telemetry is not None else None
    rep = st.reported.data if st.reported is not None else None
    telemetry = EpisodeTelemetry(
        wall_ms=_num(rep, "wall_ms"),
        setup_ms=_num(st.provisioned.data if st.provisioned else None, "setup_ms"),
        model_calls=_num(tel, "model_calls"),
        input_tokens=_num(tel, "input_tokens"),
        output_tokens=_num(tel, "output_tokens"),
        cost_usd=_num(tel, "cost_usd"),
        actions=_num(tel, "actions"),
    )
    evidence = {
        k: ref
        for k, ref in (
            ("planned", _ref(st.planned)),
            ("pre_snapshot", _ref(st.pre)),
            ("reported", _ref(st.reported)),
            ("post_read", _ref(st.post)),
            ("terminal", _ref(st.terminal)),
        )
        if ref is not None
    }
    try:
        base: dict[str, Any] = {
            "episode_id": st.ep,
            "arm": p["arm"],
            "task_id": p["task_id"],
            "trial": p["trial"],
            "category": Category(p["category"]),
            "substrate": Substrate(p["substrate"]),
            "split": p["split"],
            "reversible": p["reversible"],
            "effect_declared": p["effect_declared"],
            "correct_action_available": p["correct_action_available"],
            "reported_success": None if rep is None else rep.get("reported_success"),
            "halted": None if rep is None else rep.get("halted"),
            "telemetry": telemetry,
            "evidence": evidence,
        }
    except (KeyError, ValueError) as exc:
        raise ProjectionError(
            f"episode {st.ep}: planned event #{st.planned.seq} is missing or has a bad field: {exc}"
        ) from None
    if st.terminal is None:
        return _failed(base, FailureClass.UNKNOWN, (INTERRUPTED,))
    return _scored(st, base)


def _failed(base: dict[str, Any], fc: FailureClass, reasons: tuple[str, ...]) -> EpisodeRecord:
    return EpisodeRecord(
        **base,
        true_state=None,
        outcome=None,
        swer_variant=None,
        eligible=False,
        failure_class=fc,
        verdict_reasons=reasons,
    )


def _scored(st: _Episode, base: dict[str, Any]) -> EpisodeRecord:
    assert st.terminal is not None and st.planned is not None
    if st.terminal.type == EpisodeFailed.TYPE:
        d = st.terminal.data
        fc = _failure_class(d.get("failure_class"))
        return _failed(base, fc, (f"failed at {d.get('stage', '?')}: {d.get('error', '')}",))
    if st.reported is None or not isinstance(st.reported.data.get("reported_success"), bool):
        return _failed(base, FailureClass.EVALUATION, ("finished without a readable agent report",))
    p = st.planned.data
    try:
        effect = converter.structure(p["effect"], Effect).resolve(p.get("params", {}))
    except _BAD_DATA as exc:  # an effect the log cannot rebuild is an evaluation failure
        return _failed(
            base, FailureClass.EVALUATION, (f"effect in event #{st.planned.seq} is invalid: {exc}",)
        )
    verdict = judge(effect, _snapshot(st.pre, "pre_snapshot"), _snapshot(st.post, "post_read"))
    cls = classify(
        st.reported.data["reported_success"],
        verdict.true_state,
        bool(p["correct_action_available"]),
    )
    if not cls.scoreable:
        return EpisodeRecord(
            **base,
            true_state=TrueState.UNREADABLE,
            outcome=None,
            swer_variant=None,
            eligible=False,
            failure_class=FailureClass.EVALUATION,
            verdict_reasons=(*verdict.reasons, cls.reason),
            observed_count=verdict.observed_count,
            expected_count=verdict.expected_count,
        )
    return EpisodeRecord(
        **base,
        true_state=verdict.true_state,
        outcome=cls.outcome,
        swer_variant=cls.swer_variant,
        eligible=True,
        failure_class=None,
        verdict_reasons=verdict.reasons,
        observed_count=verdict.observed_count,
        expected_count=verdict.expected_count,
    )


def _failure_class(value: Any) -> FailureClass:
    try:
        return FailureClass(value)
    except ValueError:
        return FailureClass.UNKNOWN


def fold_episode(events: Sequence[EventLike]) -> EpisodeRecord:
    """Fold one episode's events (log order) into its record; no terminal means interrupted."""
    if not events:
        raise ProjectionError("fold_episode needs at least the episode.planned event")
    ep = events[0].ep
    if ep is None or any(e.ep != ep for e in events):
        raise ProjectionError("fold_episode takes the events of exactly one episode")
    st = _Episode(ep)
    for e in events:
        st.add(e)
    return st.record()


def project_episodes(events: Iterable[EventLike]) -> Iterator[EpisodeRecord]:
    """Stream records out of a whole log (episodes interleaved), one per terminal event."""
    live: dict[str, _Episode] = {}
    for e in events:
        if e.ep is None:
            continue
        st = live.get(e.ep)
        if st is None:
            st = live[e.ep] = _Episode(e.ep)
        st.add(e)
        if st.terminal is not None:
            del live[e.ep]
            yield st.record()
    for st in live.values():
        yield st.record()
