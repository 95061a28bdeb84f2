"""The oracle mutation audit (issue 25 item 4): a third-party ledger plugin's six weak
oracles are each refused, naming the column or table they ignore, whatever its JSON type;
the sound task is audited."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import attrs
import orjson
import pytest
from event_edits import _events, _rechain
from ledger_plugin import NAMED, WEAK, LedgerProvider, ledger_task, sound, unchecked

from effectbench.audit.checks import audit_log
from effectbench.audit.report import AuditReport
from effectbench.audit.runner import audit_provider
from effectbench.model import Effect, FieldEquals, OracleSpec, ParamRef, RecordWritten
from effectbench.testing import InMemoryProvider, memory_task
from effectbench.verify.run_check import verify_run


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


# --- the seal: adversarially_audited is earned from the logged reads, never claimed -------------

SOUND_REF = "oracle::ledger::sound::t0"
AMOUNT_REF = f"oracle::{WEAK['amount'].task_id}::t0"


def _survived(e: dict[str, Any]) -> bool:
    return e["ep"] == AMOUNT_REF and e["data"]["mutation"]["name"].startswith("payments.amount ")


@pytest.mark.parametrize(
    ("task_id", "dropped"),
    [
        ("ledger::sound", lambda e: e["ep"] == SOUND_REF),  # every read of a sound task
        (WEAK["amount"].task_id, _survived),  # only the reads that would show the survivors
    ],
)
def test_a_log_whose_mutation_reads_were_dropped_attests_nothing(
    ledger: AuditReport, tmp_path: Path, task_id: str, dropped: Any
) -> None:
    """A forger drops mutation reads and re-makes the hash chain (no secret needed): the
    audit re-judges every planned mutation from the log, so the task is not attested."""
    events = _events(ledger.log_path)
    kept = [e for e in events if e["type"] != "episode.mutation_read" or not dropped(e)]
    assert len(kept) < len(events)
    report = audit_log(_rechain(kept, tmp_path / "events.jsonl"))
    t = next(t for t in report.tasks if t.task_id == task_id)
    assert report.attestations[task_id] is False, t.reasons
    assert any(r.endswith("planned mutation(s) have no read in the log") for r in t.reasons)


def test_verify_rejudges_the_mutation_reads_not_the_audits_claim(
    ledger: AuditReport, tmp_path: Path
) -> None:
    """The sound task's mutation reads dropped, the chain and the manifest's log hash made
    to match, audit.json left saying audited: verify re-derives the attestation from the
    log and names the manifest's claim as false."""
    run = tmp_path / "run"
    shutil.copytree(ledger.log_path.parent, run)
    kept = [
        e
        for e in _events(ledger.log_path)
        if not (e["type"] == "episode.mutation_read" and e["ep"] == SOUND_REF)
    ]
    _rechain(kept, run / "events.jsonl")
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    assert manifest["attestations"]["adversarially_audited"]["ledger::sound"] is True
    last = orjson.loads((run / "events.jsonl").read_bytes().splitlines()[-1])
    manifest["log"].update(final_hash=last["h"], events=len(kept))
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    claimed = orjson.loads((run / "audit.json").read_bytes())
    assert claimed["attestations"]["ledger::sound"] is True  # the forger's evidence, untouched
    report = verify_run(run)
    assert not report.ok
    assert (
        "manifest.json: attestations.adversarially_audited.ledger::sound claimed true, "
        "recomputed false"
    ) in report.reasons, report.reasons
