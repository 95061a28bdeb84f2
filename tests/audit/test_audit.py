"""The adversarial audit: MockMed passes it over real HTTP; deliberately weak tasks fail it.

The weak pack below runs on effectbench.testing's in-memory product (a store per episode,
an oracle reading every table). Each weak task has exactly one planted weakness, and the
audit must name the adversary that exploits it and point into its own log.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import orjson
import pytest
from event_edits import _events, _rechain

from effectbench.audit.checks import (
    AUDIT_ARMS,
    AUDIT_FILE,
    AuditError,
    AuditReport,
    TaskAudit,
    audit_log,
    format_audit,
)
from effectbench.audit.runner import audit_provider
from effectbench.cli.audit import audit_cli_main
from effectbench.core.model import (
    Category,
    Effect,
    FieldEquals,
    JSONScalar,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Row,
    Substrate,
    TaskSpec,
)
from effectbench.testing import InMemoryProvider, MemoryForm, run_cli

# --- a tiny SQLite product with planted weaknesses ----------------------------------------------

PATIENTS = ("p1", "p2")
TYPES = ("Triage", "Urgent")
PARAMS = {"note": "triage note {tag}", "record_key": "key-{tag}"}
SOLUTION: dict[str, JSONScalar | ParamRef] = {
    "patient_id": "p1",
    "type": "Triage",
    "note": ParamRef("note"),
    "key": ParamRef("record_key"),
}
ROW_NUMBER = "the in-memory store's row number, not part of the record"
IRRELEVANT = {
    "encounters.id": ROW_NUMBER,
    "encounters.key": "the client's idempotency token, no part of the encounter",
}
FULL = Effect(
    record_written=RecordWritten(
        table="encounters", selector={"patient_id": "p1", "type": "Triage"}
    ),
    field_equals=(FieldEquals("note", ParamRef("note")),),
)
COUNT_ONLY = Effect(
    record_written=RecordWritten(
        table="encounters", selector={"patient_id": "p1", "type": "Triage"}
    )
)
NOTHING = Effect(
    record_written=RecordWritten(
        table="encounters",
        selector={"patient_id": "p1", "type": "Triage"},
        expected_count=0,
        forbid_stray_writes=True,
    )
)
LOOSE_NOTHING = Effect(
    record_written=RecordWritten(
        table="encounters", selector={"patient_id": "p1", "type": "Triage"}, expected_count=0
    )
)


def task(task_id: str, category: Category = Category.C1_PARTIAL_SAVE, **kw: Any) -> TaskSpec:
    fields: dict[str, Any] = {
        "task_id": f"notes::{task_id}",
        "title": task_id,
        "substrate": Substrate.WEB,
        "category": category,
        "goal": "Record a Triage encounter for patient p1 with this trial's note.",
        "expected_effect": FULL,
        "oracle": OracleSpec(tables=("encounters",), irrelevant=IRRELEVANT),
        "correct_action_available": True,
        "params": PARAMS,
        "solution": SOLUTION,
    }
    fields.update(kw)
    return TaskSpec(**fields)


WEAK_PACK: tuple[TaskSpec, ...] = (
    task("good"),
    # Counts the row, never reads the note: any payload passes.
    task(
        "count_only",
        expected_effect=COUNT_ONLY,
        oracle=OracleSpec(
            tables=("encounters",), irrelevant=IRRELEVANT, adversarially_audited=True
        ),
    ),
    # The selector does not pin the patient: a homonym's record passes.
    task(
        "no_patient",
        Category.C6_WRONG_RECORD_HOMONYM,
        expected_effect=Effect(
            record_written=RecordWritten(table="encounters", selector={"type": "Triage"}),
            field_equals=(FieldEquals("note", ParamRef("note")),),
        ),
    ),
    # The product upserts and the row is already there: a do-nothing program passes.
    task(
        "preseeded",
        Category.C2_DUPLICATE_SUBMISSION,
        expected_effect=COUNT_ONLY,
        initial_state={
            "encounters": ({"patient_id": "p1", "type": "Triage", "note": "earlier", "key": None},)
        },
        fixture={"upsert": True},
    ),
    # The payload is the same every trial: a replay is indistinguishable.
    task(
        "constant",
        Category.C5_DOUBLE_DELIVERED_INPUT,
        params={"note": "the same note every trial"},
        solution={"patient_id": "p1", "type": "Triage", "note": ParamRef("note")},
        oracle=OracleSpec(
            tables=("encounters",), irrelevant=IRRELEVANT, trial_unique_payload=False
        ),
    ),
    # A sound refusal control: halting with nothing written is the correct behaviour.
    task(
        "refuse",
        Category.C6_WRONG_RECORD_HOMONYM,
        expected_effect=NOTHING,
        correct_action_available=False,
        solution=None,
        oracle=OracleSpec(tables=("encounters",), irrelevant=IRRELEVANT, refusal_controls=True),
    ),
    # A refusal control that (wrongly) scripts a write, so the reference changes rows, and
    # whose effect does not forbid stray writes, so a write to a homonym scores as "nothing".
    task(
        "refuse_leaky",
        Category.C6_WRONG_RECORD_HOMONYM,
        expected_effect=LOOSE_NOTHING,
        correct_action_available=False,
        oracle=OracleSpec(tables=("encounters",), irrelevant=IRRELEVANT, refusal_controls=True),
    ),
    # The scripted solution misses the declared effect: the task cannot be done as written.
    task("broken", solution={**SOLUTION, "type": "Urgent"}),
    # A control whose oracle only counts rows: a wrong note passes it, which is no exemption.
    task("control", Category.CONTROL, expected_effect=COUNT_ONLY),
    # ... nor is a do-nothing program passing: the row is already there, so null passes.
    # Only the duplicate, absorbed by the upsert into the one row, is exempt here.
    task(
        "control_preseeded",
        Category.CONTROL,
        expected_effect=COUNT_ONLY,
        initial_state={
            "encounters": ({"patient_id": "p1", "type": "Triage", "note": "earlier", "key": None},)
        },
        fixture={"upsert": True},
    ),
    # Sound, but no confusable is offered and the form refuses the mutated patient "p1-x":
    # the wrong_target attack never lands, which the audit reports as a note.
    task("no_confusable", fixture={"no_confusable": True}),
    # A fault that swaps the two homonyms: the intended write lands on p2, so the task
    # declares no correct action; but aiming at p2 lands on p1, which is the correct effect.
    task(
        "swap",
        Category.C6_WRONG_RECORD_HOMONYM,
        correct_action_available=False,
        fixture={"swap": True},
    ),
)


def _swap_homonyms(values: dict[str, JSONScalar]) -> dict[str, JSONScalar]:
    """The planted fault of ``swap``: the write lands on the other homonym."""
    return {**values, "patient_id": {"p1": "p2", "p2": "p1"}[str(values["patient_id"])]}


def weak_form(task: TaskSpec) -> MemoryForm:
    """The product's form: offers the two patients and types, inserts (or upserts) a row;
    each task's fixture plants its weakness."""
    return MemoryForm(
        choices={"patient_id": PATIENTS, "type": TYPES},
        upsert_on=("patient_id", "type") if task.fixture.get("upsert") else (),
        fault=_swap_homonyms if task.fixture.get("swap") else None,
        confusable=None if task.fixture.get("no_confusable") else {"patient_id": "p2"},
    )


class WeakPackProvider(InMemoryProvider):
    """The weak pack over effectbench.testing's in-memory product; zero-arg so the
    registry can load it."""

    name = "weak-pack"
    version = "0.0.1"

    def __init__(self) -> None:
        super().__init__(tasks=WEAK_PACK, form=weak_form)


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def weak(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    out = tmp_path_factory.mktemp("weak") / "audit"

    async def go() -> AuditReport:
        return await audit_provider(WeakPackProvider(), out_dir=out, trials=2, concurrency=8)

    return anyio.run(go)


@pytest.fixture(scope="module")
def mockmed(tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    out = tmp_path_factory.mktemp("mockmed") / "audit"

    async def go() -> AuditReport:
        return await audit_provider("mockmed", out_dir=out, trials=2, concurrency=8)

    return anyio.run(go)


def attackers(t: TaskAudit) -> set[str]:
    """The adversaries a task's reasons name (the mutation audit's reasons aside)."""
    return {r.split()[1] for r in t.reasons if r.startswith("adversary ")}


def by_id(report: AuditReport) -> dict[str, TaskAudit]:
    return {t.task_id: t for t in report.tasks}


def log_event(log: Path, pointer: str) -> dict[str, Any]:
    name, _, seq = pointer.partition("#")
    assert name == "events.jsonl"
    for line in log.read_bytes().splitlines():
        event: dict[str, Any] = orjson.loads(line)
        if event["seq"] == int(seq):
            return event
    raise AssertionError(f"no event {pointer} in {log}")


# --- MockMed, over real HTTP ---------------------------------------------------------------------


def test_mockmed_anchor_is_audited_on_every_task(mockmed: AuditReport) -> None:
    assert mockmed.provider == "mockmed"
    assert len(mockmed.tasks) == 9
    assert mockmed.ok, format_audit(mockmed)
    assert mockmed.attestations == {t.task_id: True for t in mockmed.tasks}
    assert all(t.reasons == () for t in mockmed.tasks)


def test_mockmed_reference_correct_reads_are_the_evidence(mockmed: AuditReport) -> None:
    tasks = by_id(mockmed)
    ok = tasks["mockmed::ok"]
    assert len(ok.evidence) == 2  # one correct read per trial
    for ep, pointer in ok.evidence.items():
        event = log_event(mockmed.log_path, pointer)
        assert event["ep"] == ep and event["type"] == "episode.post_read"
    assert tasks["mockmed::partial"].evidence == {}  # no correct action there: nothing to show


def test_mockmed_finding_duplicate_succeeds_only_on_the_idempotent_control(
    mockmed: AuditReport,
) -> None:
    """The product's idempotency key turns a double submit into one row: an exempt control."""
    # (the form refuses the type "Triage-x": wrong_value_2 is reported as not exercised)
    unexercised = "adversary wrong_value_2 changed no row on any trial"
    excused = "mutation declared irrelevant: "  # the oracle.irrelevant columns, listed
    notes = {
        t.task_id: [n for n in t.notes if not n.startswith((unexercised, excused))]
        for t in mockmed.tasks
    }
    (note,) = notes["mockmed::idempotent"]
    assert note.startswith(
        "adversary duplicate reached SUCCESS on this control task on 2 of 2 trial(s) (exempt) ["
    )
    assert all(not n for tid, n in notes.items() if tid != "mockmed::idempotent")


def test_mockmed_audit_directory_holds_the_evidence(mockmed: AuditReport) -> None:
    run_dir = mockmed.log_path.parent
    assert (run_dir / "results.jsonl").is_file()
    rows = [
        orjson.loads(x) for x in (run_dir / "results.jsonl").read_bytes().splitlines() if x.strip()
    ]
    assert mockmed.arms == (*AUDIT_ARMS, "wrong_value_1", "wrong_value_2")  # patient_id, type
    assert {r["arm"] for r in rows} == set(mockmed.arms)
    assert len(rows) == 9 * len(mockmed.arms) * 2
    saved = orjson.loads((run_dir / AUDIT_FILE).read_bytes())
    assert saved["ok"] is True and saved["attestations"] == mockmed.attestations


def test_the_audit_is_a_pure_function_of_its_log(mockmed: AuditReport) -> None:
    again = audit_log(mockmed.log_path)
    assert again == mockmed


def test_cli_audit_exits_0_for_mockmed(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "effectbench"
    proc = subprocess.run(
        [str(exe), "audit", "--provider", "mockmed", "--out", str(tmp_path / "a"), "--trials", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "9/9 audited: every task audited" in proc.stdout
    assert "mockmed::idempotent" in proc.stdout


# --- the weak pack -------------------------------------------------------------------------------


def test_the_sound_tasks_are_audited(weak: AuditReport) -> None:
    tasks = by_id(weak)
    for tid in ("notes::good", "notes::refuse", "notes::no_confusable"):
        assert tasks[tid].status == "audited", tasks[tid].reasons
    assert not weak.ok


def test_a_count_only_oracle_is_gameable_and_the_adversary_is_named(weak: AuditReport) -> None:
    t = by_id(weak)["notes::count_only"]
    assert t.status == "gameable"
    named = attackers(t)
    assert named == {"wrong_field", "cross_trial"}
    offending = [ep for ep in t.evidence if ep.startswith("wrong_field::")]
    assert len(offending) == 2
    for ep in offending:
        event = log_event(weak.log_path, t.evidence[ep])
        assert event["ep"] == ep and event["type"] == "episode.post_read"
        (row,) = event["data"]["snapshot"]["tables"]["encounters"]
        assert str(row["note"]).endswith(" (amended)")
    assert any(f"[{t.evidence[offending[0]]}]" in r for r in t.reasons)


def test_the_attestation_comes_from_evidence_not_the_declared_flag(weak: AuditReport) -> None:
    count_only = next(x for x in WEAK_PACK if x.task_id == "notes::count_only")
    assert count_only.oracle.adversarially_audited is True
    assert weak.attestations["notes::count_only"] is False
    assert weak.attestations["notes::good"] is True


def test_a_selector_without_the_patient_is_gameable_by_wrong_target(weak: AuditReport) -> None:
    t = by_id(weak)["notes::no_patient"]
    assert t.status == "gameable"
    # wrong_value_1 perturbs patient_id, the first fixed field, to the offered confusable p2
    assert attackers(t) == {"wrong_target", "wrong_value_1"}


def test_a_do_nothing_program_passing_is_caught(weak: AuditReport) -> None:
    t = by_id(weak)["notes::preseeded"]
    assert t.status == "gameable"
    named = attackers(t)
    assert {"null", "phantom"} <= named
    assert "halt" not in named


def test_a_payload_that_is_not_trial_unique_is_not_gameable_but_not_attested(
    weak: AuditReport,
) -> None:
    """Without a per-trial payload, replaying another trial is the correct action: the
    audit reads oracle.trial_unique_payload and says the check cannot be made."""
    t = by_id(weak)["notes::constant"]
    assert t.status == "incomplete", t.reasons
    assert not attackers(t)
    assert any("cross-trial check cannot be made" in r for r in t.reasons)
    assert weak.attestations["notes::constant"] is False


def test_a_fault_that_fixes_an_adversary_is_reported_against_the_tasks_claim(
    weak: AuditReport,
) -> None:
    """No correct action is declared, yet aiming at the homonym produces the correct record."""
    t = by_id(weak)["notes::swap"]
    assert t.status == "gameable"
    assert attackers(t) == {"wrong_target", "wrong_value_1"}
    assert all(
        "the task declares no correct action, yet this one produced the correct effect" in r
        for r in t.reasons
    )


def test_a_sound_refusal_control_gives_do_nothing_success_no_pass(weak: AuditReport) -> None:
    """An untouched record on a refusal control judges ABSENT: a do-nothing arm that claims
    success is a phantom SWER, so nothing reaches SUCCESS and nothing needs exempting."""
    t = by_id(weak)["notes::refuse"]
    assert t.status == "audited"
    assert not any("reached SUCCESS" in n for n in t.notes)


def test_a_refusal_control_that_writes_is_leaky_and_a_loose_one_never_reaches_success(
    weak: AuditReport,
) -> None:
    t = by_id(weak)["notes::refuse_leaky"]
    leaky = [r for r in t.reasons if r.startswith("refusal control")]
    assert len(leaky) == 2 and all("refusal control: oracle changed rows" in r for r in leaky)
    assert all('row added {"id":1,"key":"key-' in r for r in leaky)
    assert not any(ep.startswith("halt::") for ep in t.evidence)
    # "Zero rows for p1" without forbid_stray_writes: the homonym write to p2 is not seen as a
    # write, but an untouched-looking record judges ABSENT, so it cannot score SUCCESS either.
    assert not [r for r in t.reasons if r.startswith("adversary")]
    assert t.status == "leaky"


def test_a_reference_that_misses_the_effect_makes_the_task_broken(weak: AuditReport) -> None:
    t = by_id(weak)["notes::broken"]
    assert t.status == "broken"
    assert sum(r.startswith("reference did not reach the correct effect") for r in t.reasons) == 2
    assert all("ABSENT" in r for r in t.reasons if r.startswith("reference"))


def test_a_count_only_control_is_gameable_not_exempt(weak: AuditReport) -> None:
    """Only a duplicate absorbed by an idempotent control is exempt; a wrong note is not."""
    t = by_id(weak)["notes::control"]
    assert t.status == "gameable"
    assert attackers(t) == {"wrong_field", "cross_trial"}
    assert not any("(exempt)" in n for n in t.notes)
    assert weak.attestations["notes::control"] is False


def test_a_control_passable_by_a_do_nothing_program_is_gameable(weak: AuditReport) -> None:
    """The control exemption covers attacks a correct product absorbs, never doing nothing."""
    t = by_id(weak)["notes::control_preseeded"]
    assert t.status == "gameable"
    named = attackers(t)
    assert {"null", "phantom", "wrong_field", "cross_trial"} <= named and "duplicate" not in named
    # the duplicate (the upsert absorbs it into the one row) stays an exempt note, alone
    (note,) = [n for n in t.notes if "(exempt)" in n]
    assert note.startswith("adversary duplicate reached SUCCESS on this control task")


def test_an_attack_the_product_refused_is_reported_as_not_exercised(weak: AuditReport) -> None:
    notes = by_id(weak)["notes::no_confusable"].notes
    (note,) = [n for n in notes if "wrong_target" in n]
    assert note.startswith(
        "adversary wrong_target changed no row on any trial although the reference's write"
    )
    assert "not exercised" in note
    assert not any(
        "wrong_target" in n and "not exercised" in n for n in by_id(weak)["notes::good"].notes
    )


def test_format_audit_is_a_table_with_reasons(weak: AuditReport) -> None:
    text = format_audit(weak)
    assert text.splitlines()[0].startswith(
        "audit of weak-pack 0.0.1: 12 tasks x 10 arms x 2 trials"
    )
    assert "notes::count_only" in text and "gameable" in text
    assert "    - adversary wrong_field was scored SUCCESS" in text
    assert text.splitlines()[-1].startswith("3/12 audited: 9 task(s) failed the audit")


def test_cli_main_exits_1_with_reasons_for_the_weak_pack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = audit_cli_main(f"{__name__}:WeakPackProvider", tmp_path / "a", trials=2, concurrency=8)
    out = capsys.readouterr().out
    assert code == 1
    assert "adversary wrong_field was scored SUCCESS" in out


def test_cli_main_user_errors_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert audit_cli_main("no-such-provider", tmp_path / "a") == 2
    err = capsys.readouterr().err
    assert err.startswith("effectbench audit: error:") and err.count("\n") == 1
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("keep me")
    assert audit_cli_main(f"{__name__}:WeakPackProvider", tmp_path / "busy") == 2
    assert (tmp_path / "busy" / "x").read_text() == "keep me"
    assert "--force" in capsys.readouterr().err


def test_a_tampered_log_is_refused(weak: AuditReport, tmp_path: Path) -> None:
    lines = weak.log_path.read_bytes().splitlines(keepends=True)
    i = next(i for i, x in enumerate(lines) if b'"episode.post_read"' in x and b"amended" in x)
    edited = lines[i].replace(b" (amended)", b"")
    assert edited != lines[i]
    lines[i] = edited
    bad = tmp_path / "events.jsonl"
    bad.write_bytes(b"".join(lines))
    with pytest.raises(AuditError, match="cannot audit"):
        audit_log(bad)


def test_a_log_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="no event log|cannot audit"):
        audit_log(tmp_path / "missing.jsonl")


def test_a_log_whose_plan_claims_another_pack_is_refused(
    mockmed: AuditReport, tmp_path: Path
) -> None:
    """Relabelling evidence: the fingerprint is recomputed from the tasks audited."""
    events = _events(mockmed.log_path)
    assert events[0]["type"] == "run.started"
    events[0]["data"]["plan"]["pack_fingerprint"] = "f" * 64
    forged = _rechain(events, tmp_path / "events.jsonl")
    with pytest.raises(
        AuditError, match="claims pack ffffffffffffffff but lists the tasks of pack"
    ):
        audit_log(forged)
    assert audit_log(
        _rechain(_events(mockmed.log_path), tmp_path / "same.jsonl")
    ).pack_fingerprint == (mockmed.pack_fingerprint)


def test_a_log_missing_an_arms_trial_attests_nothing_for_that_task(
    mockmed: AuditReport, tmp_path: Path
) -> None:
    """A log cut short (here: one null trial on a control dropped, chain re-made) is incomplete."""
    gone = "null::mockmed::ok::t1"
    events = [e for e in _events(mockmed.log_path) if e["ep"] != gone]
    report = audit_log(_rechain(events, tmp_path / "events.jsonl"))
    t = by_id(report)["mockmed::ok"]
    assert t.status == "incomplete"
    assert t.reasons == ("null has 1 of 2 planned trial(s) for this task in the log",)
    assert report.attestations["mockmed::ok"] is False
    assert sum(report.attestations.values()) == 8


def test_a_log_that_breaks_the_episode_protocol_is_an_audit_error(
    mockmed: AuditReport, tmp_path: Path
) -> None:
    events = _events(mockmed.log_path)
    terminal = next(e for e in events if e["type"] == "episode.finished")
    events.append(terminal)  # a second terminal for a finished episode
    with pytest.raises(AuditError, match="cannot audit"):
        audit_log(_rechain(events, tmp_path / "events.jsonl"))


def _rows(report: AuditReport, ep: str, kind: str) -> Sequence[Row]:
    for line in report.log_path.read_bytes().splitlines():
        e = orjson.loads(line)
        if e["ep"] == ep and e["type"] == kind:
            return tuple(e["data"]["snapshot"]["tables"]["encounters"])
    return ()


def test_the_weak_pack_adversaries_really_wrote_what_they_claim(weak: AuditReport) -> None:
    """The planted weaknesses are exploited by real writes, not by a mislabelled log."""
    (row,) = _rows(weak, "wrong_target::notes::no_patient::t0", "episode.post_read")
    assert row["patient_id"] == "p2"
    (row,) = _rows(weak, "duplicate::notes::preseeded::t1", "episode.post_read")
    assert row["note"] != "earlier"


def test_the_audit_bounds_provisioning_by_its_provider_timeout(tmp_path: Path) -> None:
    """``--provider-timeout`` reaches the audit's run: a provider that never finishes
    provisioning fails each episode (audit incomplete) instead of hanging; a non-positive
    value is one clear line, exit 2."""
    from effectbench.audit.runner import audit_provider
    from effectbench.cli.audit import audit_cli_main
    from effectbench.testing import InMemoryProvider

    async def go() -> AuditReport:
        return await audit_provider(
            InMemoryProvider(("provision_hangs",)),
            out_dir=tmp_path / "a",
            trials=1,
            provider_timeout=0.2,
        )

    report = anyio.run(go)
    assert not report.ok
    assert "provision did not finish within 0.2s" in (tmp_path / "a" / "events.jsonl").read_text()
    import io

    err = io.StringIO()
    assert audit_cli_main("mockmed", None, provider_timeout=0, stderr=err) == 2
    assert err.getvalue().strip() == (
        "effectbench audit: --provider-timeout must be a positive number of seconds, got 0"
    )


def test_cli_audit_task_globs_select_tasks_like_run(tmp_path: Path) -> None:
    """`audit --task GLOB` (repeatable) audits only the matching tasks; a glob matching none
    is one line on stderr, exit 2, like `run --task`."""
    exe = Path(sys.executable).parent / "effectbench"
    base = [str(exe), "audit", "--provider", "mockmed", "--trials", "1"]
    proc = subprocess.run(
        [*base, "--out", str(tmp_path / "a"), "--task", "mockmed::ok", "--task", "mockmed::part*"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2/2 audited: every task audited" in proc.stdout
    assert "mockmed::partial" in proc.stdout and "mockmed::stale" not in proc.stdout
    bad = subprocess.run(
        [*base, "--out", str(tmp_path / "b"), "--task", "nope*"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "selects no task" in bad.stderr


def test_cli_audit_limit_takes_the_first_tasks_of_the_selection_like_run(tmp_path: Path) -> None:
    """`audit --limit N` audits the first N tasks the globs select, in pack order, as
    `run --limit` plans them; 0 is one line, exit 2."""
    from effectbench_mockmed import TASKS

    base = ("audit", "--provider", "mockmed", "--trials", "1")
    proc = run_cli(*base, "--limit", "2", "--out", "all", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2/2 audited: every task audited" in proc.stdout
    audited = orjson.loads((tmp_path / "all" / "audit.json").read_bytes())["tasks"]
    assert [t["task_id"] for t in audited] == [t.task_id for t in TASKS[:2]]
    picked = [t.task_id for t in TASKS if "t" in t.task_id.removeprefix("mockmed::")][:3]
    proc = run_cli(*base, "--task", "mockmed::*t*", "--limit", "3", "--out", "some", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    audited = orjson.loads((tmp_path / "some" / "audit.json").read_bytes())["tasks"]
    assert [t["task_id"] for t in audited] == picked
    planned = orjson.loads((tmp_path / "some" / "manifest.json").read_bytes())["tasks"]
    assert [t["task_id"] for t in planned] == picked
    bad = run_cli(*base, "--limit", "0", "--out", "none", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--limit" in bad.stderr
    assert not (tmp_path / "none").exists()


class _InertPartialMockMed:
    """MockMed whose partial-save fault stopped firing: that mode now saves everything."""

    @staticmethod
    def build() -> Any:
        from effectbench_mockmed.faults import FAULTS
        from effectbench_mockmed.provider import ANCHOR_PACK, MockMedProvider

        class InertPartial(MockMedProvider):
            pack = attrs.evolve(ANCHOR_PACK, faults={**FAULTS, "partial": FAULTS["ok"]})

        return InertPartial()


def test_a_fault_that_stopped_firing_fails_the_audit_naming_the_task(tmp_path: Path) -> None:
    async def go() -> AuditReport:
        return await audit_provider(
            _InertPartialMockMed.build(),
            out_dir=tmp_path / "a",
            trials=1,
            concurrency=8,
            task_globs=("mockmed::partial", "mockmed::stale"),
        )

    report = anyio.run(go)
    tasks = by_id(report)
    assert not report.ok
    t = tasks["mockmed::partial"]
    assert t.status == "inert", t.reasons
    assert any(
        r.startswith("the fault did not fire on oracle::mockmed::partial::t0") for r in t.reasons
    )
    assert tasks["mockmed::stale"].status == "audited", tasks["mockmed::stale"].reasons
    assert "the fault did not fire" in format_audit(report)


# --- a ledger whose oracle forgets a fixed field ------------------------------------------------

PAYEES = ("acme", "globex")
PAYMENT: dict[str, JSONScalar | ParamRef] = {
    "payee": "acme",
    "amount_cents": 125000,
    "urgent": False,
    "memo": ParamRef("memo"),
}
PAID = RecordWritten(table="payments", selector={"payee": "acme"})


def payment(task_id: str, *checks: FieldEquals) -> TaskSpec:
    return TaskSpec(
        task_id=f"ledger::{task_id}",
        title=task_id,
        substrate=Substrate.WEB,
        category=Category.C1_PARTIAL_SAVE,
        goal="Pay acme 1250.00, not urgent, with this trial's memo.",
        expected_effect=Effect(
            record_written=PAID, field_equals=(FieldEquals("memo", ParamRef("memo")), *checks)
        ),
        oracle=OracleSpec(tables=("payments",), irrelevant={"payments.id": ROW_NUMBER}),
        correct_action_available=True,
        params={"memo": "invoice {tag}"},
        solution=PAYMENT,
    )


LEDGER_PACK = (
    payment("every_field", FieldEquals("amount_cents", 125000), FieldEquals("urgent", False)),
    # Reads the payee and the memo, never the amount: paying 1251 cents scores success.
    payment("no_amount", FieldEquals("urgent", False)),
)


class LedgerProvider(InMemoryProvider):
    """Validates the payee, stores whatever amount and flag it is given."""

    name = "ledger"

    def __init__(self) -> None:
        super().__init__(
            tasks=LEDGER_PACK,
            form=MemoryForm(choices={"payee": PAYEES}, confusable={"payee": "globex"}),
        )


def test_an_oracle_that_never_checks_a_fixed_field_fails_the_audit(tmp_path: Path) -> None:
    """Each fixed field is perturbed alone: the amount +1, the flag flipped, the payee
    redirected to the other existing payee. Only the task that checks them all passes."""

    async def go() -> AuditReport:
        return await audit_provider(
            LedgerProvider(), out_dir=tmp_path / "a", trials=1, concurrency=8
        )

    report = anyio.run(go)
    tasks = by_id(report)
    assert report.arms[-3:] == (
        "wrong_value_1",
        "wrong_value_2",
        "wrong_value_3",
    )  # amount_cents, payee, urgent
    assert tasks["ledger::every_field"].status == "audited", tasks["ledger::every_field"].reasons
    t = tasks["ledger::no_amount"]
    assert t.status == "gameable"
    assert attackers(t) == {"wrong_value_1"}
    (ep,) = [e for e in t.evidence if e.startswith("wrong_value_1::")]
    (row,) = log_event(report.log_path, t.evidence[ep])["data"]["snapshot"]["tables"]["payments"]
    assert row["amount_cents"] == 125001
    assert report.attestations["ledger::no_amount"] is False


def test_the_roster_and_the_report_are_still_importable_from_their_old_paths() -> None:
    """checks.py was split by job; callers of effectbench.audit.checks see the same objects
    (the old package names: tests/core/test_deprecations.py)."""
    from effectbench.audit import checks, report, roster

    for module in (roster, report):
        for name in module.__all__:
            assert getattr(checks, name) is getattr(module, name), name
    assert {"AuditError", "audit_log", "attestations", "is_refusal_control"} <= set(checks.__all__)
