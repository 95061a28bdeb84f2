"""The oracle mutation audit's verdict over one task, from its logged reads (pure).

The reference's first-trial episode carries ``episode.mutation_planned`` and one
``episode.mutation_read`` per mutation (run/mutate.py). Each applied mutation's record is
judged again here, with the task's effect, against the twin's pre-read: a mutation of a
correct record is *killed* when the judge no longer calls it CORRECT (on a refusal
control, whose untouched record judges ABSENT: when it is no longer ABSENT). One that
survives fails the task, unless the task's ``oracle.irrelevant`` names its column
(``table.column``) or its table (``table.*``), with a reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from effectbench.core.codec import structure_effect_resolved, structure_snapshot
from effectbench.core.model import Snapshot, TaskSpec, TrueState
from effectbench.run.mutate import wants_mutations
from effectbench.run.mutations import Mutation, declared
from effectbench.scoring.labels import score_episode

__all__ = ["MutationEvidence", "MutationScore", "score_mutations"]


@attrs.define
class MutationEvidence:
    """What one reference episode logged for the mutation audit (raw event data)."""

    planned: Mapping[str, Any] | None = None
    planned_seq: int | None = None
    reads: list[tuple[int, Mapping[str, Any]]] = attrs.field(factory=list)
    pre: Mapping[str, Any] | None = None
    episode: Mapping[str, Any] | None = None
    """The episode.planned data (effect, params)."""
    reference: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] = (None, None)


@attrs.frozen
class MutationScore:
    """A task's mutation score. ``tested`` False: not mutation-tested (``reason``)."""

    tested: bool
    reason: str = ""
    planned: int = 0
    applied: int = 0
    killed: int = 0
    refused: int = 0
    errors: tuple[str, ...] = ()
    survivors: tuple[str, ...] = ()
    """Each surviving mutation, by name, with its evidence pointer."""
    excused: tuple[str, ...] = ()
    """Survivors the task declares irrelevant, each with the declared reason."""
    skipped: int = 0
    """Mutations not applied because the task declares their column or table irrelevant."""
    survived_irrelevant: int = 0
    """How many survivors the declarations excused."""
    applicable: bool = True
    """False: the reference leaves no record the judge calls correct, so there is
    nothing correct to mutate (a fault task without a correct action): noted only."""

    def plain(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def summary(self) -> str:
        if not self.tested:
            return f"not mutation-tested: {self.reason}"
        if not self.applicable:
            return f"mutation audit not applicable: {self.reason}"
        extra = f", {self.refused} refused by the store" if self.refused else ""
        if self.skipped:
            extra += f", {self.skipped} not applied (declared irrelevant)"
        excused = (
            f", {self.survived_irrelevant} survived where the task declares it irrelevant"
            if self.survived_irrelevant
            else ""
        )
        return f"mutation score {self.killed}/{self.applied} killed{excused}{extra}"


def _snapshot(raw: Any) -> Snapshot | None:
    try:
        return structure_snapshot(raw)
    except (ValueError, KeyError, TypeError):
        return None


def score_mutations(
    task: TaskSpec,
    ev: MutationEvidence | None,
    base: TrueState | None,
    refusal_control: bool,
    version: str | None,
) -> MutationScore:
    """Judge every logged mutation of ``task`` (``base``: the reference's own true state)."""
    if not wants_mutations(task):
        return MutationScore(
            True,
            "the task declares no correct action, so no correct record is left to mutate",
            applicable=False,
        )
    if ev is None or ev.planned is None:
        return MutationScore(
            False, "no mutation audit in this log (run `effectbench audit` to produce one)"
        )
    if not ev.planned.get("tested"):
        return MutationScore(False, str(ev.planned.get("reason") or "the store cannot be mutated"))
    wanted = TrueState.ABSENT if refusal_control else TrueState.CORRECT
    if base is not wanted:
        state = base.value if base is not None else "unscored"
        return MutationScore(
            True,
            f"the reference's record judges {state}, so there is no correct record to mutate",
            applicable=False,
        )
    planned: Sequence[Any] = ev.planned.get("mutations") or ()
    p = ev.episode or {}
    try:
        effect = structure_effect_resolved(p.get("effect"), p.get("params", {}))
    except Exception as exc:  # noqa: BLE001 - logged data is untrusted
        return MutationScore(False, f"the episode's effect cannot be rebuilt: {exc}")
    episode_pre = _snapshot(ev.pre)
    ref_pre, ref_post = (_snapshot(r) if r is not None else None for r in ev.reference)
    reference = (ref_pre, ref_post) if ref_pre is not None and ref_post is not None else None
    applied = killed = refused = 0
    errors: list[str] = []
    survivors: list[str] = []
    excused: dict[tuple[str, str], list[str]] = {}
    seen: set[int] = set()
    for seq, read in ev.reads:
        index = read.get("index")
        mutation = read.get("mutation") or {}
        name = str(mutation.get("name", "?"))
        if not isinstance(index, int) or index in seen or not 0 <= index < len(planned):
            errors.append(f"mutation read #{seq} is not one of the planned mutations")
            continue
        seen.add(index)
        if mutation != planned[index]:
            errors.append(f"mutation read #{seq} does not match planned mutation {index}")
            continue
        status = read.get("status")
        if status == "refused":
            refused += 1
            continue
        if status != "applied":
            errors.append(f"{name}: {read.get('detail', 'not run')} [events.jsonl#{seq}]")
            continue
        pre = episode_pre if read.get("pre") is None else _snapshot(read.get("pre"))
        post = _snapshot(read.get("snapshot"))
        if pre is None or post is None or not pre.readable or not post.readable:
            errors.append(f"{name}: no readable oracle reads [events.jsonl#{seq}]")
            continue
        verdict, _ = score_episode(
            effect,
            pre,
            post,
            reported_success=True,
            correct_action_available=task.correct_action_available,
            scoring_version=version,
            reference=reference,
        )
        applied += 1
        if verdict.true_state is not wanted:
            killed += 1
            continue
        m = Mutation.of(mutation)
        why = None if m is None else declared(task.oracle.irrelevant, m)
        if m is not None and why is not None:
            excused.setdefault((m.where, why), []).append(name.removeprefix(m.where).strip())
        else:
            survivors.append(f"{name} [events.jsonl#{seq}]")
    missing = len(planned) - len(seen)
    if missing > 0:
        errors.append(f"{missing} of {len(planned)} planned mutation(s) have no read in the log")
    skipped = len(ev.planned.get("skipped") or ())
    return MutationScore(
        True,
        planned=len(planned),
        skipped=skipped,
        applied=applied,
        killed=killed,
        refused=refused,
        errors=tuple(errors),
        survivors=tuple(survivors),
        excused=tuple(
            f"{where}: {', '.join(kinds)} (irrelevant: {why})"
            for (where, why), kinds in excused.items()
        ),
        survived_irrelevant=sum(len(k) for k in excused.values()),
    )
