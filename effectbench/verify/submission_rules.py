"""The submission check's rules over one submitted row: one short pure function per
check, in ``ROW_RULES``, the one table ``submission._rederive`` runs (docs/leaderboard.md
lists every rule). ``row_facts`` re-derives what the rules compare against (the trial
payload, the effect, the oracle readings, the labels judge and classify give them); a
rule returns its reasons (none: it holds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs

from effectbench.core.codec import converter, structure_any_effect
from effectbench.core.hashing import content_hash
from effectbench.core.model import (
    AnyEffect,
    DiffEffect,
    FailureClass,
    Snapshot,
    TaskSpec,
    trial_params,
    trial_tag,
)
from effectbench.outputs.artifacts import TASK_AXES
from effectbench.verify.compare import LABEL_FIELDS, task_axis

__all__ = ["ROW_RULES", "RowFacts", "row_facts"]


@attrs.frozen
class RowFacts:
    """One submitted row (``where`` names it) of ``task``'s trial ``trial``, and what the
    verifier re-derives for it: the trial payload (``params``, ``tag``), the effect and
    its hash, the effect the row carries hashed (None: unreadable), whether it has a report
    and readings to score (``scored``), the readings structured (``post`` None: they could
    not be, ``malformed`` says why; ``twin``: a reference-mode row's twin reads) and the
    labels they give (``expected``; None when none can be derived)."""

    where: str
    row: Mapping[str, Any]
    task: TaskSpec
    trial: int
    params: Mapping[str, str]
    tag: str
    effect: AnyEffect
    effect_hash: str
    row_effect_hash: str | None
    scored: bool
    post: Snapshot | None = None
    twin: tuple[Snapshot, Snapshot] | None = None
    malformed: str | None = None
    expected: Mapping[str, Any] | None = None
    verdict_reasons: tuple[str, ...] = ()

    @property
    def reference_mode(self) -> bool:
        return isinstance(self.effect, DiffEffect) and self.effect.is_reference

    @property
    def read(self) -> bool:
        """Whether the row's own pre- and post-readings were structured (twin reads aside)."""
        return self.scored and self.post is not None


# --- the payload, the effect, the axes ---------------------------------------------------------


def params_are_present(f: RowFacts) -> Iterable[str]:
    """Refuses a row without params: its trial payload cannot be checked."""
    if isinstance(f.row.get("params"), dict):
        return ()
    return (f"{f.where}: params missing; the trial payload cannot be checked",)


def _tag_missing(f: RowFacts) -> bool:
    params = f.row.get("params")
    return (
        isinstance(params, dict)
        and any("{tag}" in t for t in f.task.params.values())
        and not any(isinstance(v, str) and f.tag in v for v in params.values())
    )


def params_carry_the_trial_tag(f: RowFacts) -> Iterable[str]:
    """Refuses params without this trial's tag where the task's params carry one: the
    declared trials/seeds do not reproduce the payload."""
    if not _tag_missing(f):
        return ()
    why = (
        f"{f.where}: params carry no trial tag {f.tag} for ({f.task.task_id}, trial {f.trial}); "
        "the declared trials/seeds do not reproduce this payload"
    )
    return (why,)


def params_are_what_the_seeds_give(f: RowFacts) -> Iterable[str]:
    """Refuses params (with the tag, where one is due) that differ from ``trial_params``."""
    params = f.row.get("params")
    if not isinstance(params, dict) or _tag_missing(f) or params == f.params:
        return ()
    return (f"{f.where}: params differ from the payload the declared trials/seeds give",)


def effect_is_the_tasks(f: RowFacts) -> Iterable[str]:
    """Refuses a row whose effect (or its hash) is not the task's declared effect resolved
    for this trial: its labels would be judged against another effect."""
    if f.row_effect_hash == f.effect_hash and f.row.get("effect_hash") == f.effect_hash:
        return ()
    return (f"{f.where}: effect is not the task's declared effect for this trial",)


def axes_are_the_tasks(f: RowFacts) -> Iterable[str]:
    """Refuses each task axis (category, substrate, split, ...) that differs from the
    task's: the metrics would count the row under another."""
    wants = ((field, task_axis(f.task, field)) for field in TASK_AXES)
    return tuple(
        f"{f.where}: {field} {f.row.get(field)!r} differs from the task's {want!r}"
        for field, want in wants
        if f.row.get(field) != want
    )


# --- the readings ------------------------------------------------------------------------------


def twin_reads_need_a_reference_diff(f: RowFacts) -> Iterable[str]:
    """Refuses twin reads on a row whose effect is not a reference-mode diff: nothing
    would check them."""
    if not f.read or f.row.get("reference") is None or f.reference_mode:
        return ()
    why = (
        f"{f.where}: carries twin reads (reference), but its effect is not a reference-mode "
        "diff: nothing would check them"
    )
    return (why,)


def twin_reads_are_the_reference_programs(f: RowFacts) -> Iterable[str]:
    """Refuses twin reads of another program than the task's reference program."""
    ref = f.row.get("reference")
    if not f.read or not f.reference_mode or not isinstance(ref, dict):
        return ()
    assert isinstance(f.effect, DiffEffect)
    if ref.get("program") == f.effect.reference:
        return ()
    why = (
        f"{f.where}: twin reads are of program {ref.get('program')!r}, not the task's "
        f"reference program {f.effect.reference!r}"
    )
    return (why,)


def readings_are_well_formed(f: RowFacts) -> Iterable[str]:
    """Refuses readings (the row's or its twin's) that do not read as snapshots: no
    label can be derived from them, so the row is not counted."""
    return (
        ()
        if f.malformed is None
        else (f"{f.where}: oracle readings are malformed ({f.malformed})",)
    )


def reference_rows_carry_twin_reads(f: RowFacts) -> Iterable[str]:
    """Refuses a reference-mode row without twin reads: its expected diff is the twin's
    observed one and cannot be re-derived without them."""
    if not f.scored or f.malformed is not None or not f.reference_mode or f.twin is not None:
        return ()
    why = (
        f"{f.where}: a reference-mode diff, but the row carries no twin reads "
        "(reference): its expected diff cannot be re-derived"
    )
    return (why,)


def unscored_rows_say_why(f: RowFacts) -> Iterable[str]:
    """Refuses a row with no report and reading to score and no valid failure_class saying
    why it was not scored; the row is not counted."""
    if f.scored or f.expected is not None:
        return ()
    why = (
        f"{f.where}: no agent report and oracle reading to score, and no valid failure_class "
        f"({f.row.get('failure_class')!r}) saying why"
    )
    return (why,)


def labels_are_rederived(f: RowFacts) -> Iterable[str]:
    """Refuses each label (true_state, outcome, swer_variant, eligible, failure_class) that
    differs from the one judge and classify give the row's raw fields (a failed row may
    or may not state a true_state)."""
    expected = f.expected
    if expected is None:
        return ()
    return tuple(
        f"{f.where}: {field} claimed {f.row.get(field)!r}, re-derived {expected[field]!r}"
        for field in LABEL_FIELDS
        if not (field == "true_state" and expected["true_state"] is None)
        and f.row.get(field) != expected[field]
    )


ROW_RULES: Final[tuple[Callable[[RowFacts], Iterable[str]], ...]] = (
    params_are_present,
    params_carry_the_trial_tag,
    params_are_what_the_seeds_give,
    effect_is_the_tasks,
    axes_are_the_tasks,
    twin_reads_need_a_reference_diff,
    twin_reads_are_the_reference_programs,
    readings_are_well_formed,
    reference_rows_carry_twin_reads,
    unscored_rows_say_why,
    labels_are_rederived,
)


# --- re-deriving what the rules compare against ------------------------------------------------


def _snapshot(raw: Any, what: str) -> Snapshot:
    if raw is None:
        return Snapshot.unreadable(f"no {what} in the row")
    return converter.structure(raw, Snapshot)


def _twin(ref: Any, effect: AnyEffect) -> tuple[Snapshot, Snapshot] | None:
    """A reference-mode row's twin reads, structured (None: no reads, or not a
    reference-mode effect). Malformed reads raise."""
    if ref is None or not (isinstance(effect, DiffEffect) and effect.is_reference):
        return None
    if not isinstance(ref, dict):
        raise TypeError("reference is not an object of the twin's two reads")
    return (
        _snapshot(ref.get("pre_snapshot"), "twin pre-snapshot"),
        _snapshot(ref.get("post_snapshot"), "twin post-read"),
    )


def _effect_hash(raw: Any) -> str | None:
    try:
        return content_hash(structure_any_effect(raw))
    except Exception:  # noqa: BLE001 - untrusted submission content
        return None


def _scored(f: RowFacts) -> RowFacts:
    """The labels judge and classify give the row's report and readings."""
    from effectbench.scoring.labels import score_episode

    try:
        post = converter.structure(f.row.get("post_snapshot"), Snapshot)
        pre = _snapshot(f.row.get("pre_snapshot"), "pre-snapshot")
    except Exception as exc:  # noqa: BLE001 - untrusted submission content
        return attrs.evolve(f, malformed=str(exc))
    try:
        twin = _twin(f.row.get("reference"), f.effect)
    except Exception as exc:  # noqa: BLE001 - untrusted submission content
        return attrs.evolve(f, post=post, malformed=str(exc))
    verdict, cls = score_episode(
        f.effect,
        pre,
        post,
        reported_success=bool(f.row.get("reported_success")),
        correct_action_available=f.task.correct_action_available,
        reference=twin,
    )
    expected = {
        "true_state": verdict.true_state.value,
        "outcome": None if cls.outcome is None else cls.outcome.value,
        "swer_variant": None if cls.swer_variant is None else cls.swer_variant.value,
        "eligible": cls.scoreable,
        "failure_class": None if cls.scoreable else FailureClass.EVALUATION.value,
    }
    return attrs.evolve(f, post=post, twin=twin, expected=expected, verdict_reasons=verdict.reasons)


def _failed(f: RowFacts) -> RowFacts:
    """The labels of a row that says why it was not scored (none for an invalid reason)."""
    try:
        fc = FailureClass(str(f.row.get("failure_class")))
    except ValueError:
        return f
    expected = {
        "true_state": None,
        "outcome": None,
        "swer_variant": None,
        "eligible": False,
        "failure_class": fc.value,
    }
    return attrs.evolve(f, expected=expected)


def row_facts(where: str, row: Mapping[str, Any], task: TaskSpec, trial: int) -> RowFacts:
    """Everything the rules compare one row against, re-derived from its raw fields."""
    params = trial_params(task, trial)
    effect = task.expected_effect.resolve(params)
    scored = (
        isinstance(row.get("reported_success"), bool)
        and row.get("post_snapshot") is not None
        and row.get("failure_class") in (None, FailureClass.EVALUATION.value)
    )
    facts = RowFacts(
        where=where,
        row=row,
        task=task,
        trial=trial,
        params=params,
        tag=trial_tag(task.task_id, trial),
        effect=effect,
        effect_hash=content_hash(effect),
        row_effect_hash=_effect_hash(row.get("effect")),
        scored=scored,
    )
    return _scored(facts) if scored else _failed(facts)
