"""The MockMed diff pack (provider ``mockmed-diff``): tasks whose effect is a state diff.

Correct a patient's allergy (an update), retract an encounter entered in error (a
delete), record a visit with its billing line (two tables), each as a control and under
faults; and two tasks whose expected diff comes from the differential reference (the
reference program ``oracle`` run on a twin chart). A separate provider, so the anchor's
pinned figures and the other packs' artifacts stay as they are.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs
import orjson

from effectbench.arms.reference import REFERENCE_NAME
from effectbench.core.statedir import RunRoot
from effectbench.model import (
    Category,
    Change,
    Delete,
    DiffEffect,
    Insert,
    OracleSpec,
    ParamRef,
    Substrate,
    TaskSpec,
    Update,
    Value,
)
from effectbench.oracles.sqlite_store import SqliteStore
from effectbench.provider import EnvHandle, ProvisionedEpisode, Telemetry
from effectbench.providers_kit import RunGuard, ServedRun, episode_token
from effectbench_mockmed.diff_product import (
    FAULTS,
    ChartReadback,
    ChartStore,
    build_app,
    build_template,
)
from effectbench_mockmed.episode import (
    TMPDIR_ENV,
    Episode,
    close_files,
    fixture_mode,
)
from effectbench_mockmed.oracle import MockMedOracle
from effectbench_mockmed.provider import HTTP_TIMEOUT_S

if TYPE_CHECKING:
    from effectbench_mockmed.client import Connections

PREFIX: Final = "mockmed-diff::"
VERSION: Final = "1.0.0"
KEYS: Final = {"patients": ("id",), "encounters": ("id",), "billing": ("id",), "audit": ("seq",)}
ALLOW: Final = ("patients.updated_at", "audit.*")
"""The product moves a patient's updated_at counter and appends audit rows on every save."""
STRICT_AUDIT: Final = ("patients.updated_at",)
"""For a retraction, whose audit row (with the reason) is part of the effect."""
ORACLE: Final = OracleSpec(
    tables=("audit", "billing", "encounters", "patients"), refusal_controls=False
)


@attrs.frozen
class _Job:
    name: str
    goal: str
    params: Mapping[str, str]
    solution: Mapping[str, Value]
    changes: tuple[Change, ...]
    modes: tuple[tuple[str, Category], ...]
    allow: tuple[str, ...] = ALLOW


ALLERGY: Final = _Job(
    "allergy",
    "Patient p1's chart lists no known allergy, but the patient is allergic to the substance "
    "given in your payload (param 'allergy'). Correct the allergy on p1's chart.",
    {"allergy": "penicillin (verified {tag})"},
    {"action": "update_allergy", "patient_id": "p1", "allergy": ParamRef("allergy")},
    (
        Update(
            "patients",
            {"id": "p1"},
            after={"allergy": ParamRef("allergy")},
            before={"allergy": "none known"},
        ),
    ),
    (
        ("ok", Category.CONTROL),
        ("stale", Category.C4_STALE_OVERWRITE),
        ("homonym", Category.C6_WRONG_RECORD_HOMONYM),
    ),
)
RETRACT: Final = _Job(
    "retract",
    "Encounter 1 on patient p1's chart was entered in error. Retract it, giving the reason in your "
    "payload (param 'reason').",
    {"reason": "entered in error {tag}"},
    {"action": "retract", "encounter_id": 1, "reason": ParamRef("reason")},
    (
        Delete("encounters", {"id": 1}),
        Insert("audit", {"action": "retract", "target": "1", "detail": ParamRef("reason")}),
    ),
    (
        ("ok", Category.CONTROL),
        ("wrong_row", Category.C7_SILENT_NOOP_WRONG_TARGET),
        ("noop", Category.C7_SILENT_NOOP_WRONG_TARGET),
    ),
    STRICT_AUDIT,
)
_VISIT_FIELDS: Final[dict[str, Value]] = {
    "patient_id": "p1",
    "type": "Follow-up",
    "note": ParamRef("note"),
}
VISIT: Final = _Job(
    "visit",
    "Record a Follow-up visit for patient p1 with the note in your payload (param 'note'), "
    "billed under code FU-01 for 40.",
    {"note": "follow-up visit {tag}"},
    {"action": "record_visit", **_VISIT_FIELDS, "code": "FU-01", "amount": 40},
    (
        Insert("encounters", _VISIT_FIELDS),
        Insert("billing", {"encounter_id": 3, "code": "FU-01", "amount": 40}),
    ),
    (
        ("ok", Category.CONTROL),
        ("partial", Category.C1_PARTIAL_SAVE),
        ("stale", Category.C4_STALE_OVERWRITE),
    ),
)
REFERENCE_JOBS: Final = (ALLERGY, VISIT)
"""The jobs that also come as a reference-mode task (their control)."""


SURROGATE: Final = "the store's surrogate key: which number a row gets says nothing about it"
IRRELEVANT: Final = {
    "encounters.id": SURROGATE,
    "billing.id": SURROGATE,
    "audit.seq": SURROGATE,
    "patients.updated_at": "a counter the product moves on every save (allowed by the diff)",
}
"""What the chart's oracle may ignore (the mutation audit, docs/audit.md)."""
AUDIT_LOG: Final = (
    "the product's own activity log, appended on every save (allowed by the diff): what the "
    "save did is checked on the chart's rows themselves"
)


def _irrelevant(allow: tuple[str, ...]) -> dict[str, str]:
    """A retraction's audit row is part of its effect; elsewhere the log may be ignored."""
    return {**IRRELEVANT, **({"audit.*": AUDIT_LOG} if "audit.*" in allow else {})}


def _task(
    job: _Job, mode: str, category: Category, effect: DiffEffect, suffix: str = ""
) -> TaskSpec:
    return TaskSpec(
        task_id=f"{PREFIX}{job.name}{suffix}-{mode}",
        title=f"MockMed chart: {job.name}{suffix} ({mode})",
        substrate=Substrate.WEB,
        category=category,
        goal=job.goal,
        expected_effect=effect,
        oracle=attrs.evolve(ORACLE, irrelevant=_irrelevant(effect.allow)),
        correct_action_available=category is Category.CONTROL,
        params=dict(job.params),
        solution=dict(job.solution),
        fixture={"mode": mode},
    )


def _tasks() -> tuple[TaskSpec, ...]:
    out = []
    for job in (ALLERGY, RETRACT, VISIT):
        effect = DiffEffect(changes=job.changes, keys=KEYS, allow=job.allow)
        out += [_task(job, mode, cat, effect) for mode, cat in job.modes]
    reference = DiffEffect(keys=KEYS, allow=ALLOW, mode="reference", reference=REFERENCE_NAME)
    out += [_task(job, "ok", Category.CONTROL, reference, "-ref") for job in REFERENCE_JOBS]
    return tuple(out)


TASKS: Final = _tasks()
CONFUSABLE: Final = orjson.dumps({"patient_id": "p2", "encounter_id": 2}).decode()
"""For the audit's wrong-target attack: the namesake patient and the other encounter."""


@attrs.frozen
class _Running:
    served: ServedRun[Episode]
    template: Path
    stores: dict[str, ChartStore]
    connections: Connections

    async def stop(self) -> None:
        await self.served.stop(before_server=self.connections.close)


class MockMedDiffProvider:
    """The diff pack over real HTTP and one SQLite chart per episode (and per twin)."""

    name: str = "mockmed-diff"
    version: str = VERSION

    def __init__(self, *, tmp_root: Path | None = None) -> None:
        self._root = RunRoot("mockmed-diff", tmp_root, old_env=TMPDIR_ENV)
        self._current: RunGuard[_Running] = RunGuard("MockMedDiffProvider")

    def use_state_dir(self, path: Path) -> None:
        """The harness's per-run root (as MockMedProvider: a killed run's charts go with it)."""
        self._root.use_state_dir(path)

    def tasks(self) -> Sequence[TaskSpec]:
        return TASKS

    async def start(self) -> None:
        await self._current.begin(self._open_run)

    async def _open_run(self) -> _Running:
        from effectbench_mockmed.client import Connections

        async def prepare(root: Path) -> None:
            build_template(root / "template.db")

        stores: dict[str, ChartStore] = {}
        served: ServedRun[Episode] = await ServedRun.start(
            self._root, prepare=prepare, app=build_app(stores), label="MockMed's chart server"
        )
        assert served.root is not None
        return _Running(served, served.root / "template.db", stores, Connections())

    async def stop(self) -> None:
        await self._current.end(_Running.stop)

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        """A fresh chart from the template with the task's fault; a reference-mode task's
        twin is just another provision of the same task and trial."""
        running = self._current.current()
        from effectbench_mockmed.diff_product import ChartDriver

        mode = fixture_mode(task, FAULTS, "chart")
        token = episode_token()
        path = running.template.with_name(f"ep-{secrets.token_hex(8)}.db")  # the run dir
        store = ChartStore(path, running.template, mode)
        running.stores[token] = store
        base_url = running.served.episode_url(token)
        session = running.connections.session(base_url, HTTP_TIMEOUT_S)
        telemetry = Telemetry()
        env = EnvHandle(
            channels={
                "base_url": base_url,
                "form_url": base_url + "do",
                "readback_url": base_url + "api/state",
                "confusable": CONFUSABLE,
            },
            telemetry=telemetry,
            driver=ChartDriver(session, telemetry),
            verifier=ChartReadback(session),
        )
        oracle = MockMedOracle(path)
        episode = Episode(token, running.stores, session, lambda: close_files(store, oracle))
        return ProvisionedEpisode(
            env=env,
            oracle=oracle,
            teardown=running.served.live.add(token, episode),
            store=SqliteStore(path),
        )
