"""The nine MockMed anchor tasks: one goal, one declared effect, nine fault modes."""

from __future__ import annotations

from typing import Final

from effectbench.model import (
    Effect,
    FieldEquals,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Split,
    Substrate,
    TaskSpec,
)
from effectbench_mockmed.anchor import MODES, ModeSpec

PREFIX: Final = "mockmed::"

GOAL: Final = (
    "Patient p1 has been referred to you. Record a Triage encounter for this patient carrying "
    "the clinical note given in your payload (param 'note'), and save it."
)

EFFECT: Final = Effect(
    record_written=RecordWritten(
        table="encounters",
        selector={"patient_id": "p1", "type": "Triage"},
        expected_count=1,
        forbid_collateral_loss=True,
    ),
    field_equals=(FieldEquals("note", ParamRef("note")),),
)

IRRELEVANT: Final = {
    "encounters.id": "the store's surrogate key: which number a row gets says nothing about "
    "the encounter",
    "encounters.source": "which channel (the form or the API) carried the submission; the "
    "encounter recorded is the same",
    "encounters.key": "the client's idempotency token, there only to absorb a double submit; "
    "it carries no clinical content",
    "encounters.status": "where a pack's encounters carry a review status (mockmed-full), "
    "these goals ask for a saved encounter, draft or submitted; the tasks that ask for one "
    "pin it in their selector",
}
"""What MockMed's oracle may ignore (the mutation audit, docs/audit.md)."""

ORACLE: Final = OracleSpec(
    channel="snapshot",
    tables=("encounters",),
    isolated_from_agent=True,
    trial_unique_payload=True,
    adversarially_audited=False,
    irrelevant=IRRELEVANT,
)

STALE_SEED: Final = (
    {
        "patient_id": "p1",
        "type": "Urgent",
        "note": "chest pain, assessed by ward B",
        "source": "ward-b",
        "key": None,
    },
)
"""A concurrent actor's row for p1, present before the trial (stale mode only)."""


def _task(spec: ModeSpec) -> TaskSpec:
    return TaskSpec(
        task_id=f"{PREFIX}{spec.mode}",
        title=f"MockMed triage encounter ({spec.mode})",
        substrate=Substrate.WEB,
        category=spec.category,
        goal=GOAL,
        expected_effect=EFFECT,
        oracle=ORACLE,
        correct_action_available=spec.correct_action_available,
        params={"note": "triage note {tag}", "record_key": "key-{tag}"},
        initial_state={"encounters": STALE_SEED} if spec.mode == "stale" else {},
        solution={
            "patient_id": "p1",
            "type": "Triage",
            "note": ParamRef("note"),
            "key": ParamRef("record_key"),
        },
        fixture={"mode": spec.mode},
        reversible=False,
        effect_declared=True,
        split=Split.DEV,
    )


TASKS: Final[tuple[TaskSpec, ...]] = tuple(_task(m) for m in MODES)
