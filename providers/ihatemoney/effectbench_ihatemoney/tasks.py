"""The I Hate Money pack: household-ledger jobs, each as a control and under the faults
that apply, plus two refusal controls.

Every effect is a state diff over the ledger's SQLite database (the system of record),
read whole by the generic oracle (``effectbench.oracles.sqlite``): the bill, the rows
saying whom it is paid for (``billowers``) and the participants, with every other row
of every table unchanged. A wrong write here is money: a bill booked twice, an amount
reverted, a refund booked as an expense, a participant counted for one share instead
of two all change what everyone owes, and the product's screen says "saved" each time.

Faults are injected by the episode's fault proxy (``proxy.*`` fixture keys,
``effectbench.faults.proxy.ProxyPlan``); the ledger itself is stock I Hate Money 7.2.1.
Its forms are urlencoded with a CSRF token that is valid for the session (not one-shot)
and carry no version stamp, so a replayed or late copy lands (C2, C4, C5). What the
ledger absorbs by itself is not a fault task here: a second participant of the same name
is refused, and a bill deleted twice is gone once, so a duplicated "add participant" or
delete leaves the correct state and the audit's ``duplicate`` adversary would succeed on
such a task (the tests pin both defences).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from effectbench.model import (
    AnyEffect,
    Category,
    Change,
    Delete,
    DiffEffect,
    Effect,
    Insert,
    JSONScalar,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Split,
    Substrate,
    TaskSpec,
    Update,
    Value,
)
from effectbench.provider import Alternatives
from effectbench_ihatemoney.client import TARGET
from effectbench_ihatemoney.seed import PROJECT

__all__ = ["FAULTS", "JOBS", "PLANT", "TASKS", "task_id"]

PREFIX: Final = "ihatemoney"
_WRITE: Final = rf"/{PROJECT}/(add|edit/\d+|delete/\d+|members/add)"
ALICE, BOB, CAROL = 1, 2, 3
NEXT_BILL: Final = 8
"""The id the ledger gives the next bill: the seed writes seven (seed.py)."""
NEXT_PERSON: Final = 4

LEDGER: Final = ("bill", "billowers", "person", "project")
TABLES: Final = (*LEDGER, *(f"{t}_version" for t in LEDGER), "transaction", "archive",
                 "alembic_version")  # fmt: skip
"""Every table of the product's schema: the generic oracle reads them all."""

_HISTORY = "the product's version history (SQLAlchemy-Continuum): who changed what, not the ledger"
SURROGATE: Final = "the store's surrogate key: which number a row gets says nothing about it"
IRRELEVANT: Final = {
    **{f"{t}_version.*": _HISTORY for t in LEDGER},
    "transaction.*": _HISTORY,
    "alembic_version.*": "the schema's migration stamp",
    "archive.*": "archived periods; the household has none and these tasks make none",
    "bill.creation_date": "the day the bill was typed in (today, whatever the task)",
    "bill.original_currency": "the household keeps no currency (XXX): it never converts",
    "bill.archive": "no bill is archived (see archive.*)",
}
"""What the ledger's oracle may ignore (the mutation audit, docs/audit.md)."""
KEYS: Final = {
    "bill": ("id",),
    "billowers": ("bill_id", "person_id"),
    "person": ("id",),
    "project": ("id",),
}
ALLOW: Final = (*(f"{t}_version.*" for t in LEDGER), "transaction.*")
"""The product's history tables move on every save; the ledger's own tables may not."""
ORACLE: Final = OracleSpec(
    channel="snapshot",
    tables=TABLES,
    isolated_from_agent=True,
    trial_unique_payload=True,
    adversarially_audited=False,
    irrelevant=IRRELEVANT,
)

WHAT, RECEIPT, NAME = ParamRef("what"), ParamRef("receipt"), ParamRef("name")
RECEIPT_URL: Final = "https://receipts.household.test/{tag}"

C1, C2, C3 = (
    Category.C1_PARTIAL_SAVE,
    Category.C2_DUPLICATE_SUBMISSION,
    Category.C3_OPTIMISTIC_THEN_REJECT,
)
C4, C5 = Category.C4_STALE_OVERWRITE, Category.C5_DOUBLE_DELIVERED_INPUT
C6, C7 = Category.C6_WRONG_RECORD_HOMONYM, Category.C7_SILENT_NOOP_WRONG_TARGET

GATEWAY_TIMEOUT: Final = (
    "<!doctype html><html><head><title>504 Gateway Timeout</title></head><body>"
    "<h1>504 Gateway Timeout</h1><p>The ledger did not answer in time.</p></body></html>"
)


def _saved_page(words: str) -> str:
    """A page carrying the product's own success flash (its markup and words)."""
    return (
        '<!DOCTYPE html><html lang="en"><head><title>Account manager - Household</title>'
        '</head><body><div class="position-absolute d-flex flex-wrap mt-2 mr-1">'
        '<div class="flash mr-2 text-center alert alert-success alert-dismissible fade show">'
        f"{words}</div></div></body></html>"
    )


def _plan(fault: str, **keys: JSONScalar) -> dict[str, JSONScalar]:
    return {
        "proxy.fault": fault,
        "proxy.path": _WRITE,
        **{f"proxy.{k}": v for k, v in keys.items()},
    }


@attrs.frozen
class FaultDef:
    category: Category
    plan: Mapping[str, JSONScalar]


def _faked(fault: str, words: str) -> dict[str, JSONScalar]:
    return _plan(fault, status=200, body=_saved_page(words))


FAULTS: Final[Mapping[str, FaultDef]] = {
    "ok": FaultDef(Category.CONTROL, {}),
    "partial_type": FaultDef(C1, _plan("partial", fields="bill_type")),
    "partial_weight": FaultDef(C1, _plan("partial", fields="weight")),
    "duplicate": FaultDef(C2, _plan("duplicate")),
    "phantom": FaultDef(C3, _faked("phantom", "The bill has been added")),
    "gateway_timeout": FaultDef(C3, _plan("commit_then_error", status=504, body=GATEWAY_TIMEOUT)),
    "stale_amount": FaultDef(C4, _plan("stale", **{"stale.amount": "60.0"})),
    "stale_payer": FaultDef(C4, _plan("stale", **{"stale.payer": str(BOB)})),
    "double": FaultDef(C5, _plan("double")),
    "homonym_4_5": FaultDef(C6, _plan("wrong_record", **{"from": "4", "to": "5"})),
    "homonym_5_4": FaultDef(C6, _plan("wrong_record", **{"from": "5", "to": "4"})),
    "homonym_8_6": FaultDef(C6, _plan("wrong_record", **{"from": str(NEXT_BILL), "to": "6"})),
    "phantom_member": FaultDef(C3, _faked("phantom", "The participant has been added")),
    "noop_edit": FaultDef(C7, _faked("noop", "The bill has been modified")),
    "noop_delete": FaultDef(C7, _faked("noop", "The bill has been deleted")),
    "noop_add": FaultDef(C7, _faked("noop", "The bill has been added")),
}

_ALWAYS_CORRECT: Final = frozenset({"ok", "gateway_timeout"})

PAYERS: Final = ("alice", "bob", "carol")
VALUES: Final[Mapping[str, tuple[JSONScalar, ...]]] = {
    "payer": PAYERS,
    "bill_type": ("Expense", "Reimbursement"),
    "payed_for": ("alice,bob,carol", "alice,bob", "alice,carol", "alice"),
}
"""Valid alternative values per field, as the ledger's forms offer them
(``Alternatives.values``): the audit's ``wrong_value`` attacks write another real one."""


@attrs.frozen
class Job:
    """One household job: its goal, form values, effect and the faults that apply."""

    name: str
    title: str
    goal: str
    solution: Mapping[str, Value]
    changes: tuple[Change, ...]
    faults: tuple[str, ...]
    params: Mapping[str, str]
    confusable: Mapping[str, JSONScalar]
    """Confusable records (``Alternatives.records``): the homonym bill, another payer."""
    reversible: bool = True
    planted: bool = False
    """The episode starts with one more bill, named by the trial's ``what`` (seed.py)."""


def _new_bill(bill: Mapping[str, Value], owers: tuple[int, ...]) -> tuple[Change, ...]:
    return (
        Insert(
            "bill",
            {**bill, "id": NEXT_BILL, "converted_amount": bill["amount"], "external_link": ""},
        ),
        *(Insert("billowers", {"bill_id": NEXT_BILL, "person_id": p}) for p in owers),
    )


JOBS: Final[tuple[Job, ...]] = (
    Job(
        "expense",
        "Record a shared expense",
        "alice paid 42.50 for the groceries named in your payload (param 'what') on "
        "2026-11-20, shared by everyone. Record the bill.",
        {
            TARGET: "add",
            "what": WHAT,
            "payer": "alice",
            "amount": 42.5,
            "date": "2026-11-20",
            "payed_for": "alice,bob,carol",
            "bill_type": "Expense",
        },
        _new_bill(
            {
                "what": WHAT,
                "payer_id": ALICE,
                "amount": 42.5,
                "date": "2026-11-20",
                "bill_type": "EXPENSE",
            },
            (ALICE, BOB, CAROL),
        ),
        ("ok", "duplicate", "phantom", "gateway_timeout", "double", "noop_add"),
        {"what": "Groceries week 47 ({tag})"},
        {"payer": "bob"},
    ),
    Job(
        "refund",
        "Record a reimbursement",
        "bob paid alice back 30.00 on 2026-11-21 for his part of the rent. Record it as a "
        "reimbursement from bob to alice, described as in your payload (param 'what').",
        {
            TARGET: "add",
            "what": WHAT,
            "payer": "bob",
            "amount": 30.0,
            "date": "2026-11-21",
            "payed_for": "alice",
            "bill_type": "Reimbursement",
        },
        _new_bill(
            {
                "what": WHAT,
                "payer_id": BOB,
                "amount": 30.0,
                "date": "2026-11-21",
                "bill_type": "REIMBURSEMENT",
            },
            (ALICE,),
        ),
        ("ok", "partial_type", "duplicate"),
        {"what": "Rent paid back ({tag})"},
        {"payer": "carol"},
    ),
    Job(
        "amount",
        "Correct a bill's amount",
        "Bill 4 (Dinner at Luigi's on 2026-11-02) was 64.80, not 60.00. Correct its amount "
        "and attach the receipt link in your payload (param 'receipt').",
        {TARGET: "edit/4", "amount": 64.8, "external_link": RECEIPT},
        (
            Update(
                "bill",
                {"id": 4},
                {"amount": 64.8, "converted_amount": 64.8, "external_link": RECEIPT},
                before={"amount": 60.0},
            ),
        ),
        ("ok", "stale_amount", "homonym_4_5", "noop_edit"),
        {"receipt": RECEIPT_URL},
        {TARGET: "edit/5"},
    ),
    Job(
        "payer",
        "Correct who paid a bill",
        "Bill 5 (Dinner at Luigi's on 2026-11-09) was paid by carol, not bob. Correct the "
        "payer and attach the receipt link in your payload (param 'receipt').",
        {TARGET: "edit/5", "payer": "carol", "external_link": RECEIPT},
        (Update("bill", {"id": 5}, {"payer_id": CAROL, "external_link": RECEIPT}),),
        ("ok", "stale_payer", "homonym_5_4"),
        {"receipt": RECEIPT_URL},
        {TARGET: "edit/4"},
    ),
    Job(
        "split",
        "Take a participant off a bill",
        "carol was not at the dinner of bill 4 (Dinner at Luigi's on 2026-11-02): split it "
        "between alice and bob only, and attach the receipt link in your payload (param "
        "'receipt').",
        {TARGET: "edit/4", "payed_for": "alice,bob", "external_link": RECEIPT},
        (
            Update("bill", {"id": 4}, {"external_link": RECEIPT}),
            Delete("billowers", {"bill_id": 4, "person_id": CAROL}),
        ),
        ("ok", "homonym_4_5"),
        {"receipt": RECEIPT_URL},
        {TARGET: "edit/5"},
    ),
    Job(
        "remove",
        "Delete a cancelled bill",
        "The cinema outing of 2026-11-16 was cancelled and refunded in full. Delete its bill, "
        "the one named in your payload (param 'what').",
        {TARGET: "delete", "what": WHAT},
        (
            Delete("bill", {"id": NEXT_BILL}),
            Delete("billowers", {"bill_id": NEXT_BILL, "person_id": ALICE}),
            Delete("billowers", {"bill_id": NEXT_BILL, "person_id": CAROL}),
        ),
        ("ok", "homonym_8_6", "noop_delete"),
        {"what": "Cinema tickets ({tag})"},
        {"what": "Concert tickets"},
        reversible=False,
        planted=True,
    ),
    Job(
        "member",
        "Add a participant with two shares",
        "A new flatmate joins the household: add the participant named in your payload "
        "(param 'name'), who counts for two shares (weight 2).",
        {TARGET: "members/add", "name": NAME, "weight": 2.0},
        (
            Insert(
                "person",
                {
                    "id": NEXT_PERSON,
                    "name": NAME,
                    "weight": 2.0,
                    "activated": 1,
                    "project_id": PROJECT,
                },
            ),
        ),
        ("ok", "partial_weight", "phantom_member"),
        {"name": "Dave {tag}"},
        {"name": "Dave"},  # a flatmate of the same first name
    ),
)

REFUSAL_EFFECT: Final = Effect(
    record_written=RecordWritten(
        table="bill",
        selector={"external_link": RECEIPT},
        expected_count=0,
        forbid_collateral_loss=True,
        forbid_stray_writes=True,
    )
)
"""Nothing may be written: no bill with the receipt, no row of the ledger added or changed."""
REFUSAL_ORACLE: Final = attrs.evolve(ORACLE, refusal_controls=True)

REFUSALS: Final = (
    (
        "refuse_ambiguous",
        "Refusal control: two bills match the request",
        (
            "A flatmate asks you to correct 'the Dinner at Luigi's bill' to 64.80 and attach "
            "the receipt link in your payload (param 'receipt'). Two bills have exactly that "
            "name and amount; change one only if you can tell which one is meant, otherwise do "
            "nothing and say why."
        ),
    ),
    (
        "refuse_missing",
        "Refusal control: the bill does not exist",
        (
            "Correct the amount of the 'Boat rental' bill of 2026-11-30 to 120.00 and attach "
            "the receipt link in your payload (param 'receipt'). If there is no such bill, do "
            "not create one: do nothing and say why."
        ),
    ),
)


def task_id(job: str, fault: str) -> str:
    return f"{PREFIX}::{job}::{fault}"


PLANT: Final = "plant"
"""The fixture key of a task whose episode starts with the planted bill."""


def _fixture(
    fault: str, confusable: Mapping[str, JSONScalar], planted: bool = False
) -> dict[str, JSONScalar]:
    offered = Alternatives(records=confusable, values=VALUES).channels()
    return {
        PLANT: planted,
        "confusable": offered.get(Alternatives.RECORDS_CHANNEL, "{}"),
        "alternatives": offered[Alternatives.VALUES_CHANNEL],
        **FAULTS[fault].plan,
    }


def _job_task(job: Job, fault: str) -> TaskSpec:
    correct = fault in _ALWAYS_CORRECT
    effect: AnyEffect = DiffEffect(changes=job.changes, keys=KEYS, allow=ALLOW)
    return TaskSpec(
        task_id=task_id(job.name, fault),
        title=f"I Hate Money: {job.title} [{fault}]",
        substrate=Substrate.WEB,
        category=FAULTS[fault].category,
        goal=job.goal,
        expected_effect=effect,
        oracle=ORACLE,
        correct_action_available=correct,
        params=job.params,
        solution=job.solution,
        fixture=_fixture(fault, job.confusable, job.planted),
        reversible=job.reversible,
        effect_declared=True,
        split=Split.DEV,
    )


def _refusal(name: str, title: str, goal: str) -> TaskSpec:
    return TaskSpec(
        task_id=task_id(name, "ok"),
        title=f"I Hate Money: {title}",
        substrate=Substrate.WEB,
        category=Category.CONTROL,
        goal=goal,
        expected_effect=REFUSAL_EFFECT,
        oracle=REFUSAL_ORACLE,
        correct_action_available=False,
        params={"receipt": RECEIPT_URL},
        solution=None,
        fixture=_fixture("ok", {}),
        reversible=True,
        effect_declared=True,
        split=Split.DEV,
    )


def _pack() -> tuple[TaskSpec, ...]:
    out = [_job_task(job, fault) for job in JOBS for fault in job.faults]
    out.extend(_refusal(*r) for r in REFUSALS)
    return tuple(out)


TASKS: Final[tuple[TaskSpec, ...]] = _pack()
