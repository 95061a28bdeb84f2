"""Three Roundup tasks for the ``--product`` kit's test: retitle an issue, as a control and
under two faults the tracker's screen hides (the edit lands on the homonym issue; the
proxy answers the tracker's own "edited ok" redirect and forwards nothing)."""

from __future__ import annotations

from typing import Final

from effectbench_roundup.tasks import IRRELEVANT, REDIRECTING

from effectbench.model import (
    Category,
    DiffEffect,
    JSONScalar,
    OracleSpec,
    ParamRef,
    Substrate,
    TaskSpec,
    Update,
)
from effectbench.provider import Alternatives

TITLE = ParamRef("title")
BOOKKEEPING: Final = tuple(k.removesuffix(".*") for k in IRRELEVANT if k.endswith(".*"))
"""Tables Roundup rewrites on any edit (search index, journals, sessions, CSRF keys)."""
ALLOW: Final = ("_issue._activity", "_issue._actor", *(f"{t}.*" for t in BOOKKEEPING))
ORACLE: Final = OracleSpec(
    channel="snapshot",
    tables=("_issue", *BOOKKEEPING),
    isolated_from_agent=True,
    trial_unique_payload=True,
    irrelevant=IRRELEVANT,
)
EDITED: Final = "${base}issue${id}?@ok_message=issue%20${id}%20title%20edited%20ok&@template=item"


def _task(
    mode: str, category: Category, issue: int, plan: dict[str, JSONScalar], correct: bool
) -> TaskSpec:
    return TaskSpec(
        task_id=f"roundup-kit::{mode}",
        title=f"Retitle issue{issue} ({mode})",
        substrate=Substrate.WEB,
        category=category,
        goal=f"Retitle issue{issue} to the title in your payload (param 'title').",
        expected_effect=DiffEffect(
            changes=(Update("_issue", {"id": issue}, {"_title": TITLE}),),
            keys={"_issue": ("id",)},
            allow=ALLOW,
        ),
        oracle=ORACLE,
        correct_action_available=correct,
        params={"title": "Printer replaced, ticket {tag}"},
        solution={"@target": f"issue{issue}", "title": TITLE},
        # the issue an arm could confuse with this one: the audit's wrong-target attacks aim
        # there (a made-up "issue3-x" is read by Roundup as issue3, so it tests nothing)
        fixture={
            **{f"proxy.{k}": v for k, v in plan.items()},
            **Alternatives(records={"@target": "issue1" if issue == 3 else "issue3"}).channels(),
        },
        reversible=True,
    )


TASKS: Final = (
    _task("retitle", Category.CONTROL, 3, {}, True),
    _task(
        "homonym",
        Category.C6_WRONG_RECORD_HOMONYM,
        1,
        {"fault": "wrong_record", "path": r"/tp/issue\d*", "from": "issue1", "to": "issue2"},
        False,
    ),
    _task(
        "noop",
        Category.C7_SILENT_NOOP_WRONG_TARGET,
        3,
        {
            "fault": "noop",
            "path": r"/tp/issue\d*",
            "status": 302,
            "location": EDITED,
            "body": REDIRECTING,
        },
        False,
    ),
)
SILENT: Final = frozenset({"roundup-kit::homonym", "roundup-kit::noop"})
