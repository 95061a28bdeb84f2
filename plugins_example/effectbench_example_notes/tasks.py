"""The task suite: one honest control and one fault the screen hides.

Each task states intent (never steps), declares the effect the oracle checks, and
carries its fault in ``fixture`` (arms never see it). ``{tag}`` in a param is the
trial-unique payload the harness derives, so no trial can pass on another's row.
"""

from __future__ import annotations

from effectbench.model import (
    Category,
    Effect,
    FieldEquals,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Substrate,
    TaskSpec,
)
from effectbench_example_notes.app import Fault

GOAL = "Save a new note in the notes app with this trial's title and body."

# The record the task must leave: exactly one note with this trial's title, holding
# this trial's full body, and the pre-existing note still there (no collateral loss).
EFFECT = Effect(
    record_written=RecordWritten(table="notes", selector={"title": ParamRef("title")}),
    field_equals=(FieldEquals("body", ParamRef("body")),),
)

SEED = {"notes": ({"id": 1, "title": "welcome", "body": "this note was here before the trial"},)}


def _task(
    mode: str, title: str, category: Category, fault: Fault, correct_action_available: bool
) -> TaskSpec:
    return TaskSpec(
        task_id=f"notes::{mode}",
        title=title,
        # The app runs in-process like a local desktop app; there is no web page.
        substrate=Substrate.DESKTOP,
        category=category,
        goal=GOAL,
        expected_effect=EFFECT,
        # The mutation audit (docs/audit.md) changes every column the reference wrote and
        # must see each change judged wrong; what may differ is declared, with the reason.
        oracle=OracleSpec(
            channel="snapshot",
            tables=("notes",),
            irrelevant={"notes.id": "the store's surrogate key, assigned on insert"},
        ),
        correct_action_available=correct_action_available,
        params={"title": "note {tag}", "body": "buy oat milk and call the plumber, ref {tag}"},
        initial_state=SEED,
        solution={"title": ParamRef("title"), "body": ParamRef("body")},
        fixture={"fault": fault.value},
        reversible=True,
    )


TASKS: tuple[TaskSpec, ...] = (
    _task("save", "Save a note (control)", Category.CONTROL, Fault.NONE, True),
    # The app keeps only the first 16 characters of the body yet says "Saved". No
    # submission can store the full body, so no correct action is available.
    _task(
        "clipped",
        "Save a note the app truncates",
        Category.C1_PARTIAL_SAVE,
        Fault.TRUNCATE_BODY,
        False,
    ),
)
