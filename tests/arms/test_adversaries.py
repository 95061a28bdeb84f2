"""Each adversary does exactly its one wrong thing; the reference does the right thing once."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import attrs
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from effectbench.arms.adversaries import (
    ADVERSARY_NAMES,
    REFERENCE_NAME,
    CrossTrialArm,
    DuplicateArm,
    HaltArm,
    NullArm,
    PhantomArm,
    WrongFieldArm,
    WrongTargetArm,
    parse_episode_id,
    wrong_value_solution,
)
from effectbench.arms.reference import ReferenceArm
from effectbench.core.arm import Arm, TaskView
from effectbench.core.model import (
    AgentReport,
    Effect,
    FieldEquals,
    JSONScalar,
    ParamRef,
    RecordWritten,
    Snapshot,
    Substrate,
    TrueState,
    trial_tag,
)
from effectbench.core.provider import Alternatives, EnvHandle, ProductResponse
from effectbench.scoring.judge import judge

TASK_ID = "demo::notes"
PARAMS_TEMPLATE = {"note": "triage note {tag}", "record_key": "key-{tag}"}
EFFECT = Effect(
    record_written=RecordWritten(
        table="encounters",
        selector={"patient_id": "p1", "type": "Triage"},
        idempotency_key=("key", ParamRef("record_key")),
    ),
    field_equals=(FieldEquals("note", ParamRef("note")),),
)
SOLUTION: dict[str, JSONScalar | ParamRef] = {
    "patient_id": "p1",
    "type": "Triage",
    "note": ParamRef("note"),
    "key": ParamRef("record_key"),
}


@attrs.define
class RecordingDriver:
    """A product that stores every submission as a row, like a form without faults."""

    rows: list[dict[str, JSONScalar]] = attrs.field(factory=list)

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        self.rows.append({"id": len(self.rows) + 1, **values})
        return ProductResponse(screen_says_saved=True, status=200, message="Saved")

    def snapshot(self) -> Snapshot:
        return Snapshot(readable=True, tables={"encounters": tuple(self.rows)})


@attrs.define
class CountingVerifier:
    reads: int = 0

    async def read(self) -> Snapshot:
        self.reads += 1
        return Snapshot(readable=True, tables={"encounters": ()})


def view(
    arm: str, trial: int = 3, *, solution: bool = True, effect: bool = True
) -> tuple[TaskView, dict[str, str]]:
    tag = trial_tag(TASK_ID, trial)
    params = {k: v.replace("{tag}", tag) for k, v in PARAMS_TEMPLATE.items()}
    sol: dict[str, JSONScalar] = {
        k: params[v.name] if isinstance(v, ParamRef) else v for k, v in SOLUTION.items()
    }
    task = TaskView(
        episode_id=f"{arm}::{TASK_ID}::t{trial}",
        goal="Record a Triage encounter for p1 with the note.",
        substrate=Substrate.WEB,
        params=params,
        effect=EFFECT.resolve(params) if effect else None,
        solution=sol if solution else None,
        trial=trial,
    )
    return task, params


def run(arm: Arm, task: TaskView, env: EnvHandle) -> AgentReport:
    async def go() -> AgentReport:
        return await arm.run(task, env)

    return anyio.run(go)


def true_state(driver: RecordingDriver, params: Mapping[str, str]) -> TrueState:
    empty = Snapshot(readable=True, tables={"encounters": ()})
    return judge(EFFECT.resolve(params), empty, driver.snapshot()).true_state


def test_every_arm_satisfies_the_protocol_and_names_itself() -> None:
    arms: list[Arm] = [
        NullArm(),
        HaltArm(),
        PhantomArm(),
        DuplicateArm(),
        WrongFieldArm(),
        WrongTargetArm(),
        CrossTrialArm(),
        ReferenceArm(),
    ]
    assert all(isinstance(a, Arm) for a in arms)
    assert [a.name for a in arms] == [*ADVERSARY_NAMES, REFERENCE_NAME]


def test_reference_writes_the_solution_once_and_reaches_correct() -> None:
    driver = RecordingDriver()
    env = EnvHandle(channels={}, driver=driver)
    task, params = view("oracle")
    report = run(ReferenceArm(), task, env)
    assert report.reported_success and not report.halted
    assert driver.rows == [{"id": 1, **(task.solution or {})}]
    assert true_state(driver, params) is TrueState.CORRECT
    assert [a.kind for a in env.telemetry.actions] == ["reference"]


def test_reference_halts_with_nothing_written_without_a_solution() -> None:
    driver = RecordingDriver()
    env = EnvHandle(channels={}, driver=driver)
    report = run(ReferenceArm(), view("oracle", solution=False)[0], env)
    assert not report.reported_success and report.halted
    assert driver.rows == []


def test_reference_halts_without_a_driver() -> None:
    report = run(ReferenceArm(), view("oracle")[0], EnvHandle(channels={}))
    assert report.halted and "driver" in report.message


@pytest.mark.parametrize("arm", [NullArm(), PhantomArm()])
def test_do_nothing_arms_claim_success_and_write_nothing(arm: Arm) -> None:
    driver = RecordingDriver()
    task, params = view(arm.name)
    report = run(arm, task, EnvHandle(channels={}, driver=driver))
    assert report.reported_success
    assert driver.rows == []
    assert true_state(driver, params) is TrueState.ABSENT


def test_phantom_reads_the_product_but_never_writes_and_sounds_sure() -> None:
    driver, verifier = RecordingDriver(), CountingVerifier()
    env = EnvHandle(channels={}, driver=driver, verifier=verifier)
    report = run(PhantomArm(), view("phantom")[0], env)
    assert verifier.reads == 1 and driver.rows == []
    assert "verified" in report.message and report.message != NullArm.CLAIM
    assert "read_product" in [a.kind for a in env.telemetry.actions]


def test_halt_reports_failure_and_writes_nothing() -> None:
    driver = RecordingDriver()
    report = run(HaltArm(), view("halt")[0], EnvHandle(channels={}, driver=driver))
    assert not report.reported_success and report.halted and driver.rows == []


def test_duplicate_writes_the_solution_twice() -> None:
    driver = RecordingDriver()
    task, params = view("duplicate")
    assert run(DuplicateArm(), task, EnvHandle(channels={}, driver=driver)).reported_success
    assert [r["note"] for r in driver.rows] == [params["note"]] * 2
    assert true_state(driver, params) is TrueState.WRONG_PERSISTED


def test_wrong_field_amends_the_checked_param_field_not_the_key() -> None:
    driver = RecordingDriver()
    task, params = view("wrong_field")
    assert run(WrongFieldArm(), task, EnvHandle(channels={}, driver=driver)).reported_success
    (row,) = driver.rows
    assert row["note"] == params["note"] + " (amended)"
    assert row["key"] == params["record_key"] and row["patient_id"] == "p1"
    assert true_state(driver, params) is TrueState.WRONG_PERSISTED


def test_wrong_field_without_a_declared_effect_still_picks_the_note_over_the_key() -> None:
    driver = RecordingDriver()
    task, params = view("wrong_field", effect=False)
    run(WrongFieldArm(), task, EnvHandle(channels={}, driver=driver))
    assert driver.rows[0]["note"] == params["note"] + " (amended)"


def test_wrong_target_mutates_the_first_selector_field() -> None:
    driver = RecordingDriver()
    task, params = view("wrong_target")
    run(WrongTargetArm(), task, EnvHandle(channels={}, driver=driver))
    (row,) = driver.rows
    assert row["patient_id"] == "p1-x" and row["note"] == params["note"]
    assert true_state(driver, params) is TrueState.ABSENT


def test_wrong_target_uses_a_confusable_the_provider_offers() -> None:
    driver = RecordingDriver()
    task, _ = view("wrong_target")
    env = EnvHandle(
        channels={"confusable": orjson.dumps({"patient_id": "p2"}).decode()}, driver=driver
    )
    run(WrongTargetArm(), task, env)
    assert driver.rows[0]["patient_id"] == "p2"
    assert any(a.detail.get("field") == "patient_id" for a in env.telemetry.actions)


def test_cross_trial_submits_the_next_trials_payload() -> None:
    driver = RecordingDriver()
    task, params = view("cross_trial", trial=3)
    run(CrossTrialArm(), task, EnvHandle(channels={}, driver=driver))
    other = trial_tag(TASK_ID, 4)
    (row,) = driver.rows
    assert row["note"] == f"triage note {other}" and row["key"] == f"key-{other}"
    assert true_state(driver, params) is TrueState.WRONG_PERSISTED


def test_cross_trial_without_a_trial_tag_replays_the_identical_payload() -> None:
    """A payload that is not trial-unique cannot reveal a replay: the audit must see that."""
    driver = RecordingDriver()
    task, _ = view("cross_trial")
    constant = {"patient_id": "p1", "type": "Triage", "note": "same every trial"}
    task = attrs.evolve(task, solution=constant)
    run(CrossTrialArm(), task, EnvHandle(channels={}, driver=driver))
    assert driver.rows == [{"id": 1, **constant}]


@pytest.mark.parametrize(
    "arm", [DuplicateArm(), WrongFieldArm(), WrongTargetArm(), CrossTrialArm()]
)
def test_writing_adversaries_still_claim_success_when_they_cannot_act(arm: Arm) -> None:
    assert run(arm, view(arm.name)[0], EnvHandle(channels={})).reported_success
    driver = RecordingDriver()
    assert run(
        arm, view(arm.name, solution=False)[0], EnvHandle(channels={}, driver=driver)
    ).reported_success
    assert driver.rows == []


def test_a_driver_error_is_recorded_not_raised() -> None:
    class Broken:
        async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
            raise ConnectionError("server went away")

    env = EnvHandle(channels={}, driver=Broken())
    assert run(ReferenceArm(), view("oracle")[0], env).reported_success
    assert any(
        a.kind == "submit_error" and "server went away" in str(a.detail["error"])
        for a in env.telemetry.actions
    )


task_ids = st.from_regex(r"[a-z][a-z0-9_:\-]{0,20}", fullmatch=True).filter(
    lambda s: "::t" not in s and not s.endswith(":")
)


@given(st.sampled_from([*ADVERSARY_NAMES, REFERENCE_NAME]), task_ids, st.integers(0, 10_000))
def test_episode_ids_parse_back(arm: str, task_id: str, trial: int) -> None:
    assert parse_episode_id(f"{arm}::{task_id}::t{trial}") == (arm, task_id, trial)


@pytest.mark.parametrize("bad", ["", "x", "null::t1", "null::task", "null::task::tx"])
def test_a_malformed_episode_id_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="<arm>::<task_id>::t<trial>"):
        parse_episode_id(bad)


def test_the_reference_arm_keeps_its_old_names() -> None:
    """``ReferenceArm`` (arms/reference.py) is still the ``oracle`` entry point and
    importable as ``OracleArm`` from its old module, under its logged name ``oracle``."""
    from effectbench.arms import adversaries
    from effectbench.run.registry import Registry

    assert adversaries.OracleArm is ReferenceArm
    assert ReferenceArm().name == REFERENCE_NAME == "oracle"
    assert type(Registry().arm("oracle")) is ReferenceArm


def test_wrong_value_writes_an_offered_valid_value_not_a_made_up_one() -> None:
    from effectbench.arms.adversaries import WrongValueArm

    driver = RecordingDriver()
    task, _ = view("wrong_value_2")
    offered = Alternatives(values={"type": ("Triage", "Consult", "Follow-up")})
    env = EnvHandle(channels=offered.channels(), driver=driver)
    run(WrongValueArm(2), task, env)  # the fixed fields, sorted: patient_id, type
    assert driver.rows[0]["type"] == "Consult"  # the first offered value that differs
    assert env.alternatives() == offered


scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=4))


@given(
    st.dictionaries(st.sampled_from(["patient_id", "type"]), st.lists(scalars, max_size=4)),
    st.sampled_from([1, 2]),
)
def test_wrong_value_draws_only_from_what_is_offered(
    values: dict[str, list[JSONScalar]], index: int
) -> None:
    task, _ = view(f"wrong_value_{index}")
    assert task.solution is not None
    channels = Alternatives(values=values).channels()
    built = wrong_value_solution(task, task.solution, channels, index)
    assert built is not None
    payload, field = built
    before, after = task.solution[field], payload[field]
    assert after != before and {k for k in payload if payload[k] != task.solution[k]} == {field}
    offered = [v for v in values.get(field, []) if v != before]
    if offered:
        assert after == offered[0]
    else:
        assert after == f"{before}-x"  # nothing valid offered: the generic mutation


@given(st.dictionaries(st.sampled_from(["confusable", "alternatives", "x"]), st.text()))
def test_malformed_channels_offer_nothing_and_never_raise(channels: dict[str, str]) -> None:
    offered = Alternatives.from_channels(channels)
    assert Alternatives.from_channels(offered.channels()) == offered


def test_no_adversary_claims_in_mockmeds_words() -> None:
    from effectbench.arms.adversaries import ExtraChangeArm, PartialDiffArm, WrongValueArm

    arms = [
        NullArm(),
        PhantomArm(),
        DuplicateArm(),
        WrongFieldArm(),
        WrongTargetArm(),
        CrossTrialArm(),
        WrongValueArm(1),
        ExtraChangeArm(),
        PartialDiffArm(),
    ]
    for arm in arms:
        words = set(arm.CLAIM.lower().replace(".", " ").replace(":", " ").split())
        assert not words & {"encounter", "patient", "chart", "note", "visit"}, arm.CLAIM


def test_wrong_target_without_a_record_takes_an_offered_value_of_its_field() -> None:
    """A product that validates targets refuses ``p1-x``: offered patients are used instead,
    and only a field offering no other value falls back to the made-up one."""
    task, params = view("wrong_target")
    assert task.solution is not None
    for offered, expected in (((), "p1-x"), (("p1",), "p1-x"), (("p1", "p3"), "p3")):
        driver = RecordingDriver()
        channels = Alternatives(values={"patient_id": offered}).channels() if offered else {}
        run(WrongTargetArm(), task, EnvHandle(channels=channels, driver=driver))
        (row,) = driver.rows
        assert row["patient_id"] == expected and row["note"] == params["note"]
