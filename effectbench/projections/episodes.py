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

from effectbench.core.bounds import logged
from effectbench.core.codec import structure_effect_resolved, structure_snapshot
from effectbench.core.errors import EffectBenchError
from effectbench.core.events import (
    ArmTelemetry,
    EpisodeAbandoned,
    EpisodeFailed,
    EpisodeFinished,
    EpisodePlanned,
    EpisodeProvisioned,
    PostRead,
    PreSnapshot,
    ReferencePostRead,
    ReferencePreSnapshot,
    Reported,
    RunStarted,
)
from effectbench.core.model import (
    Category,
    FailureClass,
    InvalidSpec,
    Snapshot,
    Substrate,
    TrueState,
)
from effectbench.core.rundir import LOG_FILE
from effectbench.scoring.labels import score_episode, scoring_version_of
from effectbench.scoring.records import EpisodeRecord, EpisodeTelemetry

__all__ = [
    "FOLDED",
    "EventLike",
    "ProjectionError",
    "Projector",
    "fold_episode",
    "project_episodes",
]

LOG_NAME = LOG_FILE  # the old name, kept for importers
INTERRUPTED = "did not finish (run interrupted)"
_BAD_DATA = (KeyError, TypeError, ValueError, AttributeError, cattrs.BaseValidationError)


class ProjectionError(EffectBenchError, ValueError):
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

    __slots__ = (
        "ep",
        "planned",
        "post",
        "pre",
        "provisioned",
        "ref_post",
        "ref_pre",
        "reported",
        "telemetry",
        "terminal",
        "version",
    )

    def __init__(self, ep: str, version: str | None = None) -> None:
        self.ep = ep
        self.version = version
        self.ref_pre: EventLike | None = None
        self.ref_post: EventLike | None = None
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
        self.ref_pre = self.ref_post = None

    def add(self, event: EventLike) -> None:
        t = event.type
        if t == _PLANNED:
            self.planned = event  # a (re-)planned episode starts a fresh attempt
            self._reset()
            return
        if self.planned is None:
            raise ProjectionError(
                f"episode {self.ep}: event #{event.seq} ({t}) has no episode.planned before it; "
                "either the log lost that event or the episode ran again after it terminated"
            )
        slot = _SLOT_OF.get(t)  # one dict lookup, not a chain of comparisons per event
        if slot is not None:
            # the latest of each kind wins: the last telemetry report (it is cumulative),
            # the last terminal
            setattr(self, slot, event)
        elif t == _ABANDONED:
            self._reset()

    def record(self) -> EpisodeRecord:
        if self.planned is None:
            raise ProjectionError(f"episode {self.ep}: no episode.planned event")
        return _fold(self)


_PLANNED: str = EpisodePlanned.TYPE
_ABANDONED: str = EpisodeAbandoned.TYPE
_SLOT_OF: dict[str, str] = {
    EpisodeProvisioned.TYPE: "provisioned",
    PreSnapshot.TYPE: "pre",
    ArmTelemetry.TYPE: "telemetry",
    Reported.TYPE: "reported",
    PostRead.TYPE: "post",
    EpisodeFinished.TYPE: "terminal",
    EpisodeFailed.TYPE: "terminal",
    ReferencePreSnapshot.TYPE: "ref_pre",
    ReferencePostRead.TYPE: "ref_post",
}
"""The _Episode slot each kept event type fills."""

FOLDED: frozenset[str] = frozenset(
    (
        EpisodePlanned.TYPE,
        EpisodeAbandoned.TYPE,
        EpisodeProvisioned.TYPE,
        PreSnapshot.TYPE,
        ArmTelemetry.TYPE,
        Reported.TYPE,
        PostRead.TYPE,
        ReferencePreSnapshot.TYPE,
        ReferencePostRead.TYPE,
        EpisodeFinished.TYPE,
        EpisodeFailed.TYPE,
    )
)
"""The event types ``_Episode.add`` keeps; an event of any other type only needs its
episode live (planned), so a fast pass may check that instead of feeding it."""

_CATEGORIES: dict[Any, Category] = {c.value: c for c in Category}
_SUBSTRATES: dict[Any, Substrate] = {s.value: s for s in Substrate}


def _category(value: Any) -> Category:
    """Category(value), through a dict for the common case (Enum's call is slow)."""
    try:
        found = _CATEGORIES.get(value)
    except TypeError:  # unhashable: let the enum say why
        found = None
    return Category(value) if found is None else found


def _trial(value: Any) -> int:
    """A trial number as the plan writes it: an int >= 0 (a string or a bool is refused,
    rather than failing later where trials are compared or summed)."""
    if type(value) is not int or value < 0:
        raise ValueError(f"trial must be an integer >= 0, got {value!r}")
    return value


def _substrate(value: Any) -> Substrate:
    try:
        found = _SUBSTRATES.get(value)
    except TypeError:
        found = None
    return Substrate(value) if found is None else found


def _snapshot(event: EventLike | None, what: str) -> Snapshot:
    if event is None:
        return Snapshot.unreadable(f"no {what} event in the live attempt")
    try:
        return structure_snapshot(event.data["snapshot"])
    except _BAD_DATA as exc:  # logged data is untrusted: a bad snapshot is unreadable
        return Snapshot.unreadable(f"malformed snapshot in event #{event.seq}: {exc}")


def _latencies(value: Any) -> tuple[float | None, ...] | None:
    """Per-call latencies as logged; logged data is untrusted, so a bad entry is unknown."""
    if not isinstance(value, list):
        return None
    return tuple(None if (v := logged(x)) is None else float(v) for x in value)


def _count(value: Any) -> int | None:
    """A logged count or token total: an integer in range, else unknown."""
    v = logged(value)
    return v if isinstance(v, int) else None


def _fold(st: _Episode) -> EpisodeRecord:
    planned = st.planned
    assert planned is not None
    p = planned.data
    rep = st.reported.data if st.reported is not None else None
    # Logged numbers are untrusted: one outside its range is unknown (core/bounds.py), so
    # no fold over them can overflow.
    wall_ms = None if rep is None else logged(rep.get("wall_ms"))
    setup_ms = None if st.provisioned is None else logged(st.provisioned.data.get("setup_ms"))
    if st.telemetry is None:
        telemetry = EpisodeTelemetry(wall_ms=wall_ms, setup_ms=setup_ms)
    else:
        tel = st.telemetry.data
        telemetry = EpisodeTelemetry(
            wall_ms=wall_ms,
            setup_ms=setup_ms,
            model_calls=_count(tel.get("model_calls")),
            input_tokens=_count(tel.get("input_tokens")),
            output_tokens=_count(tel.get("output_tokens")),
            cost_usd=logged(tel.get("cost_usd")),
            actions=_count(tel.get("actions")),
            model_latency_ms=logged(tel.get("model_latency_ms")),
            cost_source=tel.get("cost_source"),
            model_call_latency_ms=_latencies(tel.get("model_call_latency_ms")),
        )
    # the keys in this order, each only when its event exists
    evidence = {"planned": f"{LOG_NAME}#{planned.seq}"}
    if st.pre is not None:
        evidence["pre_snapshot"] = f"{LOG_NAME}#{st.pre.seq}"
    if st.reported is not None:
        evidence["reported"] = f"{LOG_NAME}#{st.reported.seq}"
    if st.post is not None:
        evidence["post_read"] = f"{LOG_NAME}#{st.post.seq}"
    if st.terminal is not None:
        evidence["terminal"] = f"{LOG_NAME}#{st.terminal.seq}"
    if st.ref_pre is not None:
        evidence[ReferencePreSnapshot.TYPE] = f"{LOG_NAME}#{st.ref_pre.seq}"
    if st.ref_post is not None:
        evidence[ReferencePostRead.TYPE] = f"{LOG_NAME}#{st.ref_post.seq}"
    try:
        base: dict[str, Any] = {
            "episode_id": st.ep,
            "arm": p["arm"],
            "task_id": p["task_id"],
            "trial": _trial(p["trial"]),
            "category": _category(p["category"]),
            "substrate": _substrate(p["substrate"]),
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
            f"episode {st.ep}: planned event #{planned.seq} is missing or has a bad field: {exc}"
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
        effect = structure_effect_resolved(p["effect"], p.get("params", {}))
    except _BAD_DATA as exc:  # an effect the log cannot rebuild is an evaluation failure
        return _failed(
            base, FailureClass.EVALUATION, (f"effect in event #{st.planned.seq} is invalid: {exc}",)
        )
    reference = None
    if st.ref_pre is not None or st.ref_post is not None:
        reference = (
            _snapshot(st.ref_pre, ReferencePreSnapshot.TYPE),
            _snapshot(st.ref_post, ReferencePostRead.TYPE),
        )
    try:
        verdict, cls = score_episode(
            effect,
            _snapshot(st.pre, "pre_snapshot"),
            _snapshot(st.post, "post_read"),
            reported_success=st.reported.data["reported_success"],
            correct_action_available=bool(p["correct_action_available"]),
            scoring_version=st.version,
            reference=reference,
        )
    except InvalidSpec as exc:  # e.g. a diff in a log scored under 1.0.0
        return _failed(
            base, FailureClass.EVALUATION, (f"effect in event #{st.planned.seq}: {exc}",)
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


def fold_episode(events: Sequence[EventLike], scoring_version: str | None = None) -> EpisodeRecord:
    """Fold one episode's events (log order) into its record; no terminal means interrupted.
    ``scoring_version``: the log's (its run.started names it; None: this code's)."""
    if not events:
        raise ProjectionError("fold_episode needs at least the episode.planned event")
    ep = events[0].ep
    if ep is None or any(e.ep != ep for e in events):
        raise ProjectionError("fold_episode takes the events of exactly one episode")
    st = _Episode(ep, scoring_version)
    for e in events:
        st.add(e)
    return st.record()


class Projector:
    """The streaming fold behind project_episodes, one event at a time.

    ``feed`` returns the record an event completes (or None); ``drain`` yields the
    episodes that never terminated. Every record comes with an order key: the seq of
    its terminal event, or for a drained episode ``DRAINED + seq`` of the event that
    opened its live entry. Sorting by that key reproduces the order project_episodes
    yields in, so partial folds over disjoint sets of episodes (a sharded rescore) can
    be merged with "the later record of an episode wins" intact.
    """

    DRAINED = 1 << 62

    __slots__ = ("_live", "_opened", "version")

    def __init__(self) -> None:
        self._live: dict[str, _Episode] = {}
        self._opened: dict[str, int] = {}
        self.version: str | None = None
        """The scoring version the log's run.started names (its episodes are judged so)."""

    def feed(self, e: EventLike) -> EpisodeRecord | None:
        """One event; a run-level one only sets the scoring version (from run.started)."""
        ep = e.ep
        if ep is None:
            if e.type == RunStarted.TYPE and self.version is None:
                self.version = _named_version(e.data)
            return None
        st = self._live.get(ep)
        if st is None:
            st = self._live[ep] = _Episode(ep, self.version)
            self._opened[ep] = e.seq
        st.add(e)
        if st.terminal is not None:
            del self._live[ep]
            del self._opened[ep]
            return st.record()
        return None

    def live(self, ep: str) -> bool:
        """Whether ``ep`` has an attempt in progress (planned, not yet terminated)."""
        return ep in self._live

    def in_flight(self) -> list[str]:
        """The episodes with an attempt in progress, in the order they were opened."""
        return list(self._live)

    def drain(self) -> Iterator[tuple[int, EpisodeRecord]]:
        opened = self._opened
        for ep, st in self._live.items():
            yield self.DRAINED + opened[ep], st.record()


def _named_version(data: Mapping[str, Any]) -> str:
    """The scoring version a run.started names (see scoring_version_of)."""
    named = data.get("versions")
    if not isinstance(named, Mapping):
        plan = data.get("plan")
        named = plan.get("versions") if isinstance(plan, Mapping) else None
    return scoring_version_of(named.get("scoring") if isinstance(named, Mapping) else None)


def project_episodes(events: Iterable[EventLike]) -> Iterator[EpisodeRecord]:
    """Stream records out of a whole log (episodes interleaved), one per terminal event."""
    proj = Projector()
    feed = proj.feed
    for e in events:
        rec = feed(e)
        if rec is not None:
            yield rec
    for _, rec in proj.drain():
        yield rec
