"""What the audit reads from a log in one pass: the plan, the rows each episode changed,
and the mutation audit's reads. The rules (``rules.py``) judge a task from this and the
projected episodes; nothing here decides anything."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import attrs

from effectbench.arms.adversaries import REFERENCE_NAME
from effectbench.audit.mutation import MutationEvidence
from effectbench.core import rundir
from effectbench.core.codec import converter
from effectbench.core.events import (
    TERMINAL_TYPES,
    EpisodeAbandoned,
    EpisodePlanned,
    MutationPlanned,
    MutationRead,
    PostRead,
    PreSnapshot,
    ReferencePostRead,
    ReferencePreSnapshot,
    RunStarted,
)
from effectbench.core.model import Snapshot
from effectbench.log.reader import LoggedEvent
from effectbench.oracles.sqlite import diff_snapshots
from effectbench.scoring.records import EpisodeRecord

__all__ = ["LogEvidence", "pointer", "why_unscored"]

_MUTATION_TYPES: Final = frozenset(
    {MutationPlanned.TYPE, MutationRead.TYPE, ReferencePreSnapshot.TYPE, ReferencePostRead.TYPE}
)


@attrs.define
class LogEvidence:
    """What the audit needs from one pass over the log: the plan, and for every post-read
    the rows that changed since the episode's pre-snapshot (None when a read is unusable).

    A pre-snapshot is held only until its episode ends, so memory follows the episodes in
    flight, not the size of the log.
    """

    plan: Mapping[str, Any] | None = None
    pending_pre: dict[str, tuple[int, Mapping[str, Any]]] = attrs.field(factory=dict)
    changes: dict[int, tuple[int, tuple[str, ...] | None]] = attrs.field(factory=dict)
    mutations: dict[str, MutationEvidence] = attrs.field(factory=dict)
    """Per reference episode (first trial), what the mutation audit logged."""
    _live_mutations: dict[str, MutationEvidence] = attrs.field(factory=dict)

    def tap(self, events: Iterable[LoggedEvent]) -> Iterator[LoggedEvent]:
        """Pass events through unchanged, taking what the checks need on the way."""
        for e in events:
            if e.type == RunStarted.TYPE and self.plan is None:
                self.plan = e.data.get("plan") or {}
            elif e.ep is None:
                pass
            elif e.type == EpisodePlanned.TYPE:
                if e.data.get("arm") == REFERENCE_NAME and e.data.get("trial") == 0:
                    self._live_mutations[e.ep] = MutationEvidence(episode=e.data)
            elif e.type == PreSnapshot.TYPE:
                self.pending_pre[e.ep] = (e.seq, e.data.get("snapshot") or {})
                if e.ep in self._live_mutations:
                    self._live_mutations[e.ep].pre = e.data.get("snapshot")
            elif e.type == PostRead.TYPE and e.ep in self.pending_pre:
                pre_seq, pre = self.pending_pre[e.ep]
                self.changes[e.seq] = (pre_seq, _changed_rows(pre, e.data.get("snapshot") or {}))
            elif e.ep in self._live_mutations and e.type in _MUTATION_TYPES:
                self._take_mutation(self._live_mutations[e.ep], e)
            elif e.type in TERMINAL_TYPES or e.type == EpisodeAbandoned.TYPE:
                self.pending_pre.pop(e.ep, None)
                taken = self._live_mutations.pop(e.ep, None)
                if taken is not None and e.type in TERMINAL_TYPES:
                    self.mutations[e.ep] = taken
            yield e

    @staticmethod
    def _take_mutation(m: MutationEvidence, e: LoggedEvent) -> None:
        if e.type == MutationPlanned.TYPE:
            m.planned, m.planned_seq = e.data, e.seq
        elif e.type == MutationRead.TYPE:
            m.reads.append((e.seq, e.data))
        elif e.type == ReferencePreSnapshot.TYPE:
            m.reference = (e.data.get("snapshot"), m.reference[1])
        elif e.type == ReferencePostRead.TYPE:
            m.reference = (m.reference[0], e.data.get("snapshot"))

    def changed(self, r: EpisodeRecord) -> tuple[str, ...] | None:
        """The rows episode ``r`` changed (empty: none), or None without two usable reads."""
        post, pre = _seq(r.evidence.get("post_read")), _seq(r.evidence.get("pre_snapshot"))
        entry = self.changes.get(post) if post is not None else None
        if entry is None or entry[0] != pre:
            return None
        return entry[1]


def _seq(pointer: str | None) -> int | None:
    if pointer is None or "#" not in pointer:
        return None
    tail = pointer.rsplit("#", 1)[1]
    return int(tail) if tail.isdigit() else None


def _changed_rows(pre: Mapping[str, Any], post: Mapping[str, Any]) -> tuple[str, ...] | None:
    try:
        before, after = converter.structure(pre, Snapshot), converter.structure(post, Snapshot)
    except Exception:  # noqa: BLE001 - logged data is untrusted; a bad snapshot is no evidence
        return None
    if not before.readable or not after.readable:
        return None
    return tuple(diff_snapshots(before, after).describe())


def why_unscored(r: EpisodeRecord) -> str:
    """Why episode ``r`` has no label: its failure class and the reasons it recorded."""
    detail = "; ".join(r.verdict_reasons) or "no reason recorded"
    return f"{r.failure_class.value if r.failure_class else 'unscored'}: {detail}"


def pointer(r: EpisodeRecord) -> str:
    """Where in the log episode ``r``'s evidence is: its post-read, else its last event."""
    ev = r.evidence
    return (
        ev.get("post_read")
        or ev.get("terminal")
        or ev.get("reported")
        or ev.get("planned")
        or rundir.LOG_FILE
    )
