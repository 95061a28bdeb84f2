"""The oracle mutation audit (issue 25 item 4): a third-party ledger plugin's six weak
oracles are each refused, naming the column or table they ignore, whatever its JSON type;
the sound task is audited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from ledger_plugin import NAMED, WEAK, LedgerProvider, ledger_task, sound, unchecked

from effectbench.audit.checks import audit_log
from effectbench.audit.report import AuditReport
from effectbench.audit.runner import audit_provider
from effectbench.model import Effect, FieldEquals, OracleSpec, ParamRef, RecordWritten
from effectbench.testing import InMemoryProvider, memory_task


def _audit(provider: Any, out: Path) -> AuditReport:
    async def go() -> AuditReport:
        return await audit_provider(provider, out_dir=out, trials=1, concurrency=4)

    return anyio.run(go)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    return _audit(LedgerProvider(), tmp_path_factory.mktemp("ledger") / "audit")


def test_the_sound_ledger_task_is_audited(ledger: AuditReport) -> None:
    t = next(t for t in ledger.tasks if t.task_id == "ledger::sound")
    assert t.status == "audited", t.reasons
    assert t.mutation is not None and t.mutation.applied > 0
    assert t.mutation.killed == t.mutation.applied - t.mutation.survived_irrelevant


@pytest.mark.parametrize("variant", sorted(WEAK))
def test_each_weak_oracle_is_refused_naming_what_it_ignores(
    ledger: AuditReport, variant: str
) -> None:
    t = next(t for t in ledger.tasks if t.task_id == WEAK[variant].task_id)
    # weak (a mutation survived), or gameable when an adversary's submission got through too
    assert t.status in ("weak", "gameable"), (t.status, t.reasons)
    assert not ledger.attestations[t.task_id]
    survivors = [r for r in t.reasons if r.startswith("mutation survived: ")]
    assert any(r.startswith(f"mutation survived: {NAMED[variant]} ") for r in survivors), survivors


def test_the_audit_exits_1_and_the_log_alone_gives_the_same_verdict(ledger: AuditReport) -> None:
    assert not ledger.ok
    assert audit_log(ledger.log_path) == ledger


@pytest.mark.parametrize("amount", ["12.50", 12.5, 1250, None])
def test_an_unchecked_column_is_named_whatever_its_json_type(
    tmp_path: Path, amount: object
) -> None:
    task = unchecked("amount", amount)  # type: ignore[arg-type]
    checked = ledger_task(f"checked_{type(amount).__name__}", sound(amount), amount=amount)  # type: ignore[arg-type]
    report = _audit(LedgerProvider([task, checked]), tmp_path / "a")
    weak, good = report.tasks
    assert weak.status in ("weak", "gameable"), weak.reasons
    assert any(r.startswith("mutation survived: payments.amount ") for r in weak.reasons)
    assert good.status == "audited", good.reasons


def test_an_unchecked_boolean_is_named_too(tmp_path: Path) -> None:
    """SQLite holds no booleans: the in-memory store does, so a flag the oracle never
    reads is flipped there (and, as everywhere, nulled)."""
    effect = Effect(
        RecordWritten(table="notes", selector={"owner": "p1"}),
        (FieldEquals("note", ParamRef("note")),),
    )
    task = attrs.evolve(
        memory_task(),
        expected_effect=effect,
        solution={"owner": "p1", "note": ParamRef("note"), "urgent": False},
        oracle=OracleSpec(tables=("notes",), irrelevant={"notes.id": "the row number"}),
    )
    report = _audit(InMemoryProvider(tasks=[task]), tmp_path / "a")
    (t,) = report.tasks
    assert t.status in ("weak", "gameable"), t.reasons
    assert any(r.startswith("mutation survived: notes.urgent flipped ") for r in t.reasons)
