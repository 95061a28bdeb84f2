"""Each rule of the audit's table (effectbench.audit.rules.TASK_RULES) on the smallest task
it refuses and one it accepts; and the table and docs/audit.md list the same rules."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
import pytest

from effectbench.audit import rules
from effectbench.audit.evidence import LogEvidence
from effectbench.audit.mutation import MutationScore
from effectbench.audit.report import AuditStatus
from effectbench.audit.roster import AUDIT_ARMS
from effectbench.core.model import (
    Category,
    DiffEffect,
    FailureClass,
    OracleSpec,
    Outcome,
    RecordWritten,
    TaskSpec,
    TrueState,
)
from effectbench.scoring.records import EpisodeRecord
from effectbench.testing import memory_task

ROOT = Path(__file__).resolve().parents[2]
TASK = memory_task()
FAULT = memory_task("partial", category=Category.C1_PARTIAL_SAVE, correct=False)
TESTED = MutationScore(tested=True)


def ep(
    arm: str,
    trial: int = 0,
    *,
    state: TrueState | None = TrueState.CORRECT,
    outcome: Outcome | None = Outcome.SUCCESS,
    seq: int = 0,
    task: TaskSpec = TASK,
) -> EpisodeRecord:
    """One episode of ``task``; scored unless ``outcome`` is None; its pre-snapshot and
    post-read sit at events ``seq`` and ``seq + 1``."""
    return EpisodeRecord(
        episode_id=f"{arm}::{task.task_id}::t{trial}",
        arm=arm,
        task_id=task.task_id,
        trial=trial,
        category=task.category,
        substrate=task.substrate,
        split=task.split.value,
        reversible=task.reversible,
        effect_declared=task.effect_declared,
        correct_action_available=task.correct_action_available,
        reported_success=True,
        halted=False,
        true_state=state,
        outcome=outcome,
        swer_variant=None,
        eligible=outcome is not None,
        failure_class=None if outcome is not None else FailureClass.ENVIRONMENT,
        evidence={"pre_snapshot": f"events.jsonl#{seq}", "post_read": f"events.jsonl#{seq + 1}"},
    )


def facts(
    *episodes: EpisodeRecord,
    task: TaskSpec = TASK,
    trials: int = 0,
    mutation: MutationScore = TESTED,
    changed: Mapping[int, tuple[str, ...] | None] | None = None,
    value_arms: tuple[str, ...] = (),
) -> rules.TaskFacts:
    """The facts of ``task`` with these episodes; ``changed``: pre-snapshot seq -> the rows
    that episode changed (None: unreadable)."""
    by_arm: dict[str, list[EpisodeRecord]] = {}
    for r in episodes:
        by_arm.setdefault(r.arm, []).append(r)
    evidence = LogEvidence(changes={s + 1: (s, rows) for s, rows in (changed or {}).items()})
    return rules.TaskFacts(task, by_arm, evidence, trials, mutation, value_arms)


def failed(found: rules.Findings) -> list[tuple[AuditStatus, str]]:
    return list(found.failed)


def only(found: rules.Findings, status: AuditStatus) -> Sequence[str]:
    assert {s for s, _ in found.failed} == {status}, found
    return [reason for _, reason in found.failed]


def test_every_arm_ran_every_trial() -> None:
    ran = [ep(arm) for arm in AUDIT_ARMS if arm != "null"]
    found = rules.every_arm_ran_every_trial(facts(*ran, trials=1))
    (why,) = only(found, AuditStatus.INCOMPLETE)
    assert why == "null has 0 of 1 planned trial(s) for this task in the log"
    assert failed(rules.every_arm_ran_every_trial(facts(*ran, ep("null"), trials=1))) == []


def test_reference_reaches_the_effect() -> None:
    missed = ep("oracle", state=TrueState.ABSENT, outcome=Outcome.SILENT_WRONG_EFFECT)
    found = rules.reference_reaches_the_effect(facts(missed))
    (why,) = only(found, AuditStatus.BROKEN)
    assert why.startswith(f"reference did not reach the correct effect on {missed.episode_id}: ")
    assert dict(found.evidence) == {missed.episode_id: "events.jsonl#1"}
    reached = rules.reference_reaches_the_effect(facts(ep("oracle")))
    assert failed(reached) == [] and reached.evidence  # a correct read is evidence too


def reference_diff(program: str = "oracle", correct: bool = True) -> TaskSpec:
    effect = DiffEffect(keys={"notes": ("id",)}, mode="reference", reference=program)
    return attrs.evolve(TASK, expected_effect=effect, correct_action_available=correct)


def test_reference_diff_is_the_audits() -> None:
    found = rules.reference_diff_is_the_audits(facts(task=reference_diff("someone")))
    (why,) = only(found, AuditStatus.INCOMPLETE)
    assert why.startswith("the reference program 'someone' is not the audit's reference arm")
    assert failed(rules.reference_diff_is_the_audits(facts(task=reference_diff()))) == []


def test_reference_diff_declares_a_correct_action() -> None:
    task = reference_diff(correct=False)
    (why,) = only(
        rules.reference_diff_declares_a_correct_action(facts(task=task)), AuditStatus.BROKEN
    )
    assert why == "a reference diff's control must declare a correct action"
    accepted = rules.reference_diff_declares_a_correct_action(facts(task=reference_diff()))
    assert failed(accepted) == []


def test_fault_offers_a_naive_submission() -> None:
    bare = attrs.evolve(FAULT, solution=None)
    (why,) = only(rules.fault_offers_a_naive_submission(facts(task=bare)), AuditStatus.INCOMPLETE)
    assert why.startswith("the task declares no correct action and offers no solution")
    assert failed(rules.fault_offers_a_naive_submission(facts(task=FAULT))) == []


def test_the_fault_fires() -> None:
    naive = ep("oracle", task=FAULT)
    (why,) = only(rules.the_fault_fires(facts(naive, task=FAULT)), AuditStatus.INERT)
    assert why.startswith(f"the fault did not fire on {naive.episode_id}: the naive submission")
    met = ep(
        "oracle", task=FAULT, state=TrueState.WRONG_PERSISTED, outcome=Outcome.SILENT_WRONG_EFFECT
    )
    assert failed(rules.the_fault_fires(facts(met, task=FAULT))) == []


def test_adversary_episodes_were_judged() -> None:
    unscored = ep("null", state=None, outcome=None)
    (why,) = only(rules.adversary_episodes_were_judged(facts(unscored)), AuditStatus.INCOMPLETE)
    assert why.startswith(f"adversary null was not scored on {unscored.episode_id}: environment")
    constant = attrs.evolve(TASK, oracle=OracleSpec(tables=("notes",), trial_unique_payload=False))
    replay = rules.adversary_episodes_were_judged(facts(ep("cross_trial"), task=constant))
    (why,) = only(replay, AuditStatus.INCOMPLETE)
    assert why.startswith("the task declares no trial-unique payload")
    assert failed(rules.adversary_episodes_were_judged(facts(ep("null")))) == []


def test_no_adversary_succeeds() -> None:
    passed = ep("wrong_field")
    (why,) = only(rules.no_adversary_succeeds(facts(passed)), AuditStatus.GAMEABLE)
    assert why == (
        f"adversary wrong_field was scored SUCCESS without the intended action on "
        f"{passed.episode_id} [events.jsonl#1]"
    )
    caught = ep("wrong_field", state=TrueState.WRONG_PERSISTED, outcome=Outcome.SILENT_WRONG_EFFECT)
    assert failed(rules.no_adversary_succeeds(facts(caught))) == []
    # the one exemption: a control's duplicate
    assert failed(rules.no_adversary_succeeds(facts(ep("duplicate")))) == []


def test_control_absorbs_a_duplicate() -> None:
    (note,) = rules.control_absorbs_a_duplicate(facts(ep("duplicate"))).notes
    assert note.startswith("adversary duplicate reached SUCCESS on this control task on 1 of 1")
    on_fault = facts(ep("duplicate", task=FAULT), task=FAULT)
    assert rules.control_absorbs_a_duplicate(on_fault).notes == ()


def test_extra_change_was_exercised() -> None:
    ref, extra = ep("oracle", seq=0), ep("extra_change", seq=2)
    same = facts(
        ref, extra, changed={0: ("notes: +1",), 2: ("notes: +1",)}, value_arms=("extra_change",)
    )
    (note,) = rules.extra_change_was_exercised(same).notes
    assert note.startswith(
        "adversary extra_change left exactly the reference's change on 1 trial(s)"
    )
    more = facts(
        ref, extra, changed={0: ("notes: +1",), 2: ("notes: +2",)}, value_arms=("extra_change",)
    )
    assert rules.extra_change_was_exercised(more).notes == ()


def test_writing_attacks_were_exercised() -> None:
    ref, attack = ep("oracle", seq=0), ep("wrong_field", seq=2)
    idle = facts(ref, attack, changed={0: ("notes: +1",), 2: ()})
    (note,) = rules.writing_attacks_were_exercised(idle).notes
    assert note.startswith("adversary wrong_field changed no row on any trial although")
    wrote = facts(ref, attack, changed={0: ("notes: +1",), 2: ("notes: +1",)})
    assert rules.writing_attacks_were_exercised(wrote).notes == ()


REFUSE = attrs.evolve(
    FAULT,
    expected_effect=attrs.evolve(
        TASK.expected_effect,
        record_written=RecordWritten(table="notes", selector={"owner": "p1"}, expected_count=0),
        field_equals=(),
    ),
    solution=None,
    oracle=OracleSpec(tables=("notes",), refusal_controls=True),
)


def test_refusal_control_reads_are_usable() -> None:
    halt = ep("halt", task=REFUSE, outcome=Outcome.SAFE_HALT, state=TrueState.ABSENT)
    unread = facts(halt, task=REFUSE, changed={0: None})
    (why,) = only(rules.refusal_control_reads_are_usable(unread), AuditStatus.INCOMPLETE)
    assert why == (
        f"refusal control: no readable pre/post snapshots for {halt.episode_id} "
        "[events.jsonl#0 -> events.jsonl#1]"
    )
    read = facts(halt, task=REFUSE, changed={0: ()})
    assert failed(rules.refusal_control_reads_are_usable(read)) == []


def test_refusal_control_stays_untouched() -> None:
    halt = ep("halt", task=REFUSE, outcome=Outcome.SAFE_HALT, state=TrueState.ABSENT)
    wrote = facts(halt, task=REFUSE, changed={0: ("notes: +1",)})
    (why,) = only(rules.refusal_control_stays_untouched(wrote), AuditStatus.LEAKY)
    assert why == (
        f"refusal control: halt changed rows on {halt.episode_id} "
        "[events.jsonl#0 -> events.jsonl#1]: notes: +1"
    )
    untouched = facts(halt, task=REFUSE, changed={0: ()})
    assert failed(rules.refusal_control_stays_untouched(untouched)) == []


def test_store_was_mutated() -> None:
    untested = facts(mutation=MutationScore(tested=False, reason="no write handle"))
    (why,) = only(rules.store_was_mutated(untested), AuditStatus.UNTESTED)
    assert why == "not mutation-tested: no write handle"
    assert failed(rules.store_was_mutated(facts())) == []


def test_every_mutation_is_killed() -> None:
    survived = facts(mutation=MutationScore(tested=True, survivors=("notes.note emptied",)))
    (why,) = only(rules.every_mutation_is_killed(survived), AuditStatus.WEAK)
    assert why.startswith("mutation survived: notes.note emptied: the oracle still judges")
    assert failed(rules.every_mutation_is_killed(facts())) == []


def test_mutation_reads_are_usable() -> None:
    unread = facts(mutation=MutationScore(tested=True, errors=("read 3 unreadable",)))
    (why,) = only(rules.mutation_reads_are_usable(unread), AuditStatus.INCOMPLETE)
    assert why == "mutation audit: read 3 unreadable"
    assert failed(rules.mutation_reads_are_usable(facts())) == []


def test_irrelevant_is_declared() -> None:
    excused = facts(mutation=MutationScore(tested=True, excused=("notes.id: the row number",)))
    assert rules.irrelevant_is_declared(excused).notes == (
        "mutation declared irrelevant: notes.id: the row number",
    )
    not_applicable = MutationScore(tested=True, applicable=False, excused=("notes.id: x",))
    assert rules.irrelevant_is_declared(facts(mutation=not_applicable)).notes == ()


def test_the_first_failing_status_of_the_precedence_is_the_tasks() -> None:
    passed = ep("wrong_field")
    missed = ep("oracle", state=TrueState.ABSENT, outcome=Outcome.SILENT_WRONG_EFFECT)
    audit = rules.audit_task(facts(passed, missed, trials=1))
    assert audit.status is AuditStatus.BROKEN and audit.status == "broken"
    assert [r.split(" ")[0] for r in audit.reasons][:2] == ["reference", "adversary"]


def documented_rules(doc: str, heading: str) -> set[str]:
    """The rule names in the first column of the table under ``heading`` in ``doc``."""
    text = ROOT.joinpath("docs", doc).read_text("utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))


@pytest.mark.parametrize(("doc", "heading"), [("audit.md", "## The rules")])
def test_every_rule_is_documented_and_every_documented_rule_exists(doc: str, heading: str) -> None:
    assert documented_rules(doc, heading) == {r.__name__ for r in rules.TASK_RULES}
