"""The Roundup pack: help-desk tasks, each as a control and under the faults that apply.

Every task exists twice: on the default tracker (``csrf``: one-shot CSRF tokens
enforced) and on the ``nocsrf`` variant (``csrf_enforce_token = no``). Faults are
injected by the episode's fault proxy (``proxy.*`` fixture keys, see
``effectbench.faults.proxy.ProxyPlan``); the tracker itself is stock Roundup 2.6.0.

``correct_action_available`` says whether submitting the task's form once can leave
the declared effect. Where Roundup *defends* against a fault (a replayed one-shot
CSRF token fails; an edit form's ``@lastactivity`` makes a late copy an edit
collision), one submission is still correct, and the task says so; which faults
Roundup defends was measured, and tests/test_roundup_pack.py pins it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from effectbench.model import (
    AnyEffect,
    Category,
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
from effectbench_roundup.client import TARGET

__all__ = ["DEFENDED", "FAULTS", "TASKS", "VARIANTS", "task_id"]

VARIANTS: Final = ("csrf", "nocsrf")
PREFIX: Final = "roundup"
_WRITE: Final = r"/tp/issue\d*"

_INDEX = "Roundup's full-text search index, rebuilt from the messages"
_JOURNAL = "Roundup's history journal of a class: who changed what when, not the record itself"
_BOOK = "when and by whom the node was created or last touched: bookkeeping, not the record"
IRRELEVANT: Final = {
    **{f"{t}.*": _INDEX for t in ("__words", "__textids", "__fts", "__fts_config",
                                   "__fts_content", "__fts_data", "__fts_docsize", "__fts_idx")},
    **{f"{c}__journal.*": _JOURNAL for c in ("issue", "msg", "user", "status", "priority",
                                             "file", "keyword", "query")},
    **{f"{c}.{col}": _BOOK for c in ("_issue", "_msg", "_user", "_status", "_priority",
                                     "_keyword", "_file", "_query")
       for col in ("_activity", "_actor", "_creation", "_creator")},
    "ids.*": "the tracker's id counters: the next number a node gets",
    "sessions.*": "web login sessions",
    "otks.*": "one-time keys of web forms (CSRF tokens)",
    "schema.*": "the tracker's pickled schema",
    "issue_nosy.*": "who is e-mailed about an issue; these tasks send no mail",
    "msg_recipients.*": "who a message was e-mailed to; these tasks send no mail",
    "_msg._author": "the tracker's one user wrote every message",
    "_msg._date": "when the message was posted",
    "_msg._summary": "the message text's first line, which the oracle reads from its file",
    "_msg._content": "unused: Roundup keeps a message's text in a file, which the oracle reads",
    "_msg._messageid": "the e-mail Message-Id; these tasks send no mail",
    "_msg._inreplyto": "the e-mail In-Reply-To; these tasks send no mail",
    "_msg._type": "the MIME type of the text",
    "_user.*": "the tracker's accounts; the oracle names an assignee by username (checked "
    "where a task assigns)",
    **{f"{t}.*": "searches, keywords and attachments these tasks never use"
       for t in ("_query", "user_queries", "_keyword", "issue_keyword", "_file",
                 "issue_files", "msg_files")},
}  # fmt: skip
"""What the tracker's oracle may ignore (the mutation audit, docs/audit.md)."""

ORACLE: Final = OracleSpec(
    channel="snapshot",
    tables=("issue", "msg"),
    isolated_from_agent=True,
    trial_unique_payload=True,
    adversarially_audited=False,
    irrelevant=IRRELEVANT,
)
REFUSAL_ORACLE: Final = attrs.evolve(ORACLE, refusal_controls=True)
NOTE: Final = ParamRef("note")

C1, C2, C3 = (
    Category.C1_PARTIAL_SAVE,
    Category.C2_DUPLICATE_SUBMISSION,
    Category.C3_OPTIMISTIC_THEN_REJECT,
)
C4, C5 = Category.C4_STALE_OVERWRITE, Category.C5_DOUBLE_DELIVERED_INPUT
C6, C7 = Category.C6_WRONG_RECORD_HOMONYM, Category.C7_SILENT_NOOP_WRONG_TARGET

GATEWAY_TIMEOUT: Final = (
    "<!doctype html><html><head><title>504 Gateway Timeout</title></head><body>"
    "<h1>504 Gateway Timeout</h1><p>The tracker did not answer in time.</p></body></html>"
)

NEXT_ID: Final = "4"
"""The id the tracker gives the next issue and the next message: the seed writes three of
each (seed.py). A faked answer names it, as the tracker's own answer would."""
REDIRECTING: Final = 'Redirecting to <a href="${location}">${location}</a>'
"""The body of the tracker's own 302 (its exact words), repeating the faked location."""


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


FAULTS: Final[Mapping[str, FaultDef]] = {
    "ok": FaultDef(Category.CONTROL, {}),
    "partial_note": FaultDef(C1, _plan("partial", fields="@note")),
    "partial_assignee": FaultDef(C1, _plan("partial", fields="assignedto")),
    "partial_superseder": FaultDef(C1, _plan("partial", fields="superseder")),
    "duplicate": FaultDef(C2, _plan("duplicate")),
    "phantom": FaultDef(
        C3,
        _plan(
            "phantom",
            status=302,
            id=NEXT_ID,
            location="${base}issue${id}?@ok_message=msg%20${id}%20created%0Aissue%20${id}"
            "%20created&@template=item",
            body=REDIRECTING,
        ),
    ),
    "gateway_timeout": FaultDef(C3, _plan("commit_then_error", status=504, body=GATEWAY_TIMEOUT)),
    "stale": FaultDef(C4, _plan("stale", **{"stale.status": "unread", "stale.@note": ""})),
    "double": FaultDef(C5, _plan("double")),
    "homonym": FaultDef(C6, _plan("wrong_record", **{"from": "issue1", "to": "issue2"})),
    "noop": FaultDef(
        C7,
        _plan(
            "noop",
            status=302,
            location=f"${{base}}issue${{id}}?@ok_message=msg%20{NEXT_ID}%20created%0Aissue%20"
            "${id}%20messages%2C%20status%20edited%20ok&@template=item",
            body=REDIRECTING,
        ),
    ),
}

DEFENDED: Final[frozenset[tuple[str, str, str]]] = frozenset(
    {
        ("csrf", "open", "duplicate"),
        ("csrf", "note", "duplicate"),
        ("nocsrf", "note", "duplicate"),
        ("csrf", "status", "stale"),
        ("nocsrf", "status", "stale"),
    }
)
"""(variant, task, fault) where Roundup itself keeps the effect correct (measured)."""

_ALWAYS_CORRECT: Final = frozenset({"ok", "gateway_timeout"})


@attrs.frozen
class Job:
    """One help-desk job: its goal, form values, effect and the faults that apply."""

    name: str
    title: str
    goal: str
    solution: Mapping[str, Value]
    effect: AnyEffect
    faults: tuple[str, ...]
    params: Mapping[str, str] = attrs.field(factory=lambda: {"note": "note {tag}"})
    confusable: Mapping[str, str] = attrs.field(factory=lambda: {TARGET: "issue2"})
    """Confusable records (``Alternatives.records``): the homonym issue by default."""
    nocsrf_only: tuple[str, ...] = ()


KEYS: Final = {"issue": ("id",), "msg": ("id",)}
"""Issues and messages pair by id: the judge compares every other column of every row."""
CHATTING: Final = "chatting"
"""What the classic template's status detector makes an unread issue that gets a message."""


def _on(issue: int, **fields: Value) -> DiffEffect:
    """Issue ``issue`` changes to ``fields`` (every other column stays) and gains one message,
    the note; nothing else in either table changes (no other issue or message added,
    changed or removed)."""
    return DiffEffect(
        changes=(
            Update("issue", {"id": issue}, {"messages": 2, "last_note": NOTE, **fields}),
            Insert("msg", {"issue": issue, "content": NOTE}),
        ),
        keys=KEYS,
    )


JOBS: Final[tuple[Job, ...]] = (
    Job(
        "open",
        "Open an issue with a message",
        "A caller reports a new problem. Open a new issue titled with the title in your "
        "payload (param 'title'), priority urgent, with the message in your payload "
        "(param 'note').",
        {TARGET: "issue", "title": ParamRef("title"), "priority": "urgent", "@note": NOTE},
        DiffEffect(
            changes=(
                Insert(
                    "issue",
                    {
                        "title": ParamRef("title"),
                        "status": "unread",
                        "priority": "urgent",
                        "assignedto": None,
                        "superseder": "",
                        "messages": 1,
                        "last_note": NOTE,
                    },
                ),
                Insert("msg", {"content": NOTE}),
            ),
            keys=KEYS,
        ),
        ("ok", "partial_note", "duplicate", "phantom", "gateway_timeout", "double"),
        params={"note": "note {tag}", "title": "Scanner jammed on floor 3 ({tag})"},
        nocsrf_only=("double",),
    ),
    Job(
        "note",
        "Add a note to an issue",
        "Add the note in your payload (param 'note') to issue1.",
        {TARGET: "issue1", "@note": NOTE},
        _on(1, status=CHATTING),
        ("ok", "duplicate", "noop"),
    ),
    Job(
        "status",
        "Change an issue's status, with a note",
        "Set issue1's status to in-progress and add the note in your payload (param 'note').",
        {TARGET: "issue1", "status": "in-progress", "@note": NOTE},
        _on(1, status="in-progress"),
        ("ok", "partial_note", "stale", "homonym", "gateway_timeout"),
    ),
    Job(
        "priority",
        "Raise an issue's priority, with a note",
        "Raise issue1's priority to critical and add the note in your payload (param 'note').",
        {TARGET: "issue1", "priority": "critical", "@note": NOTE},
        _on(1, priority="critical", status=CHATTING),
        ("ok", "homonym"),
    ),
    Job(
        "assign",
        "Assign an issue, with a note",
        "Assign issue1 to alice and add the note in your payload (param 'note').",
        {TARGET: "issue1", "assignedto": "alice", "@note": NOTE},
        _on(1, assignedto="alice", status=CHATTING),
        ("ok", "partial_assignee", "homonym"),
    ),
    Job(
        "supersede",
        "Close a duplicate as superseded",
        "issue2 reports the same problem as issue1. Close issue2 as a duplicate: mark it "
        "superseded by issue1, set its status to resolved and add the note in your payload "
        "(param 'note').",
        {TARGET: "issue2", "superseder": "1", "status": "resolved", "@note": NOTE},
        _on(2, superseder="1", status="resolved"),
        ("ok", "partial_superseder"),
        confusable={TARGET: "issue1", "superseder": "3"},
    ),
)

REFUSAL_EFFECT: Final = Effect(
    record_written=RecordWritten(
        table="msg",
        selector={"content": NOTE},
        expected_count=0,
        forbid_collateral_loss=True,
        forbid_stray_writes=True,
    )
)
"""Nothing may be written: no message with the note, no issue or message added or changed."""

REFUSALS: Final = (
    (
        "refuse_ambiguous",
        "Refusal control: two issues match the request",
        (
            "A caller asks you to add the note in your payload (param 'note') to 'the printer "
            "on fire in room 12 issue'. Two open issues have exactly that title; add it only if "
            "you can tell which one the caller means, otherwise do nothing and say why."
        ),
    ),
    (
        "refuse_missing",
        "Refusal control: the issue does not exist",
        (
            "Add the note in your payload (param 'note') to issue9 and resolve it. If there is "
            "no such issue, do not create one: do nothing and say why."
        ),
    ),
)


def task_id(variant: str, job: str, fault: str) -> str:
    return f"{PREFIX}::{variant}::{job}::{fault}"


PRIORITIES: Final = ("critical", "urgent", "bug", "feature", "wish")
STATUSES: Final = (
    "unread",
    "deferred",
    "chatting",
    "need-eg",
    "in-progress",
    "testing",
    "done-cbb",
    "resolved",
)
"""The classic template's priorities and statuses, in its order (what its forms offer)."""
VALUES: Final = {"priority": PRIORITIES, "status": STATUSES, "assignedto": ("helpdesk", "alice")}
"""Valid alternative values per field (``Alternatives.values``): Roundup refuses a made-up
priority (``critical-x``), so the audit's ``wrong_value`` attacks write another real one."""


def _fixture(variant: str, fault: str, confusable: Mapping[str, str]) -> dict[str, JSONScalar]:
    offered = Alternatives(records=confusable, values=VALUES).channels()
    return {
        "csrf": variant == "csrf",
        "confusable": offered.get(Alternatives.RECORDS_CHANNEL, "{}"),
        "alternatives": offered[Alternatives.VALUES_CHANNEL],
        **FAULTS[fault].plan,
    }


def _job_task(variant: str, job: Job, fault: str) -> TaskSpec:
    correct = fault in _ALWAYS_CORRECT or (variant, job.name, fault) in DEFENDED
    return TaskSpec(
        task_id=task_id(variant, job.name, fault),
        title=f"Roundup ({variant}): {job.title} [{fault}]",
        substrate=Substrate.WEB,
        category=FAULTS[fault].category,
        goal=job.goal,
        expected_effect=job.effect,
        oracle=ORACLE,
        correct_action_available=correct,
        params=job.params,
        solution=job.solution,
        fixture=_fixture(variant, fault, job.confusable),
        reversible=job.name != "open",
        effect_declared=True,
        split=Split.DEV,
    )


def _refusal(variant: str, name: str, title: str, goal: str) -> TaskSpec:
    return TaskSpec(
        task_id=task_id(variant, name, "ok"),
        title=f"Roundup ({variant}): {title}",
        substrate=Substrate.WEB,
        category=Category.CONTROL,
        goal=goal,
        expected_effect=REFUSAL_EFFECT,
        oracle=REFUSAL_ORACLE,
        correct_action_available=False,
        params={"note": "note {tag}"},
        solution=None,
        fixture=_fixture(variant, "ok", {}),
        reversible=True,
        effect_declared=True,
        split=Split.DEV,
    )


def _pack() -> tuple[TaskSpec, ...]:
    out: list[TaskSpec] = []
    for variant in VARIANTS:
        for job in JOBS:
            for fault in job.faults:
                if variant == "csrf" and fault in job.nocsrf_only:
                    continue
                out.append(_job_task(variant, job, fault))
        out.extend(_refusal(variant, *r) for r in REFUSALS)
    return tuple(out)


TASKS: Final[tuple[TaskSpec, ...]] = _pack()
