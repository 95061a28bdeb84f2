"""The audit's smaller fixes of issue 25 item 4: a refused second write is "not exercised"
(not gameable); contradictory diff allow-lists and a reference-mode diff filed under a
fault category are refused when the task is built."""

from __future__ import annotations

from pathlib import Path

import anyio
import attrs
import pytest

from effectbench.audit.report import AuditReport
from effectbench.audit.runner import audit_provider
from effectbench.model import (
    Category,
    Delete,
    DiffEffect,
    Insert,
    InvalidSpec,
    OracleSpec,
    ParamRef,
    Update,
)
from effectbench.testing import InMemoryProvider, MemoryForm, memory_task

NOTE = Insert("notes", {"owner": "p1", "note": ParamRef("note")})
KEYS = {"notes": ("id",)}


def test_a_product_that_refuses_the_second_write_is_not_exercised_not_gameable(
    tmp_path: Path,
) -> None:
    task = attrs.evolve(
        memory_task(),
        expected_effect=DiffEffect(changes=(NOTE,), keys=KEYS),
        oracle=OracleSpec(tables=("notes",), irrelevant={"notes.id": "the row number"}),
    )
    # the form offers only p1, so extra_change's second write (aimed at p2) is refused
    form = MemoryForm(choices={"owner": ("p1",)}, confusable={"owner": "p2"})

    async def go() -> AuditReport:
        provider = InMemoryProvider(tasks=[task], form=form)
        return await audit_provider(provider, out_dir=tmp_path / "a", trials=1, concurrency=4)

    (t,) = anyio.run(go).tasks
    assert t.status == "audited", t.reasons
    assert any(n.startswith("adversary extra_change left exactly the reference's") for n in t.notes)


@pytest.mark.parametrize(
    ("effect", "words"),
    [
        (lambda: DiffEffect(changes=(NOTE,), keys=KEYS, allow=("*.*",)), "allows every table"),
        (lambda: DiffEffect(changes=(NOTE,), keys=KEYS, allow=("notes.*",)), "'notes.*'"),
        (lambda: DiffEffect(changes=(NOTE,), keys=KEYS, allow=("notes.note",)), "notes.note"),
        (
            lambda: DiffEffect(
                changes=(Update("notes", {"id": 1}, {"note": "x"}),),
                keys=KEYS,
                allow=("notes.note",),
            ),
            "Update of notes.note",
        ),
        (
            lambda: DiffEffect(
                changes=(Delete("notes", {"id": 1}),), keys=KEYS, allow=("notes.*",)
            ),
            "Delete of table 'notes'",
        ),
    ],
)
def test_a_contradictory_allow_list_is_refused_when_built(effect: object, words: str) -> None:
    with pytest.raises(InvalidSpec, match="contradicts|allows every table") as caught:
        effect()  # type: ignore[operator]
    assert words in str(caught.value)


def test_an_allow_entry_for_a_table_the_oracle_does_not_read_is_refused() -> None:
    with pytest.raises(InvalidSpec, match="names table 'jornal', which the oracle does not read"):
        attrs.evolve(
            memory_task(),
            expected_effect=DiffEffect(changes=(NOTE,), keys=KEYS, allow=("jornal.*",)),
        )


def test_a_reference_mode_task_under_a_fault_category_is_refused_at_load() -> None:
    reference = DiffEffect(keys=KEYS, mode="reference", reference="oracle")
    with pytest.raises(InvalidSpec, match="filed under category control, not C1_partial_save"):
        attrs.evolve(memory_task(), expected_effect=reference, category=Category.C1_PARTIAL_SAVE)
    attrs.evolve(memory_task(), expected_effect=reference)  # a control: fine
