"""The read-path ladder (``--provider mockmed-ladder``): which read path catches which fault.

Ten scenarios of one triage task over real HTTP and an on-disk SQLite file with two
tables, ``encounters`` and ``billing``. The product's REST read endpoint shows the
encounters only; in ``collateral_unaudited`` the save also inserts a billing row that
endpoint never shows. The harness oracle reads every table the file's schema lists
(``SqliteAllTablesOracle``) and the declared effect forbids stray writes, so that
stray row makes the true state WRONG_PERSISTED.

Arms see three read paths of increasing reach: the save banner (``screen``), the REST
readback (``effect_rest``, via ``env.product_effect_verifier()``), and a read-only read
of every table (``effect_full``, via the ``sqlite_ro_path`` channel). The measured SWER
is 54/90, 9/90 and 0/90 (see ``LADDER_SWER``).

The ``sqlite_ro_path`` channel hands arms the episode file's path. Readers are meant to
open it with ``mode=ro`` (``effectbench.sql_oracle.read_all_tables`` does); nothing
stops a hostile arm from opening it read-write, so this pack measures read paths, it
is not an adversarial pack. The harness oracle keeps its own connection either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from effectbench.model import (
    Category,
    Effect,
    FieldEquals,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Split,
    Substrate,
    TaskSpec,
)
from effectbench.oracles.sqlite import SqliteAllTablesOracle
from effectbench.provider import Oracle
from effectbench_mockmed.faults import LADDER_FAULTS
from effectbench_mockmed.provider import VERSION, MockMedProvider, PackDef
from effectbench_mockmed.store import COLUMNS, SCHEMA, StoreSchema
from effectbench_mockmed.tasks import GOAL, STALE_SEED

__all__ = [
    "LADDER_PACK",
    "LADDER_SCHEMA",
    "LADDER_SWER",
    "LADDER_TASKS",
    "LADDER_TRIALS",
    "SCENARIOS",
    "SQLITE_RO_CHANNEL",
    "SUBMIT_TIMEOUT_S",
    "MockMedLadderProvider",
]

PREFIX: Final = "ladder::"
LADDER_TRIALS: Final = 9
SUBMIT_TIMEOUT_S: Final = 1.0
"""The form driver gives up on a save after this long; the ``timeout`` scenario hangs
``faults.LADDER_HANG_S`` (longer) after its commit, every other save answers at once.
A whole arm episode took at most ~75 ms at concurrency 32 here, so an honest save
stays far from this bound even on a loaded machine (a timed-out honest save would
shift screen's count)."""
SQLITE_RO_CHANNEL: Final = "sqlite_ro_path"

LADDER_SCHEMA: Final = StoreSchema(
    ddl=(
        SCHEMA,
        (
            "CREATE TABLE billing(id INTEGER PRIMARY KEY AUTOINCREMENT, encounter_id INTEGER, "
            "code TEXT, amount_cents INTEGER)"
        ),
    ),
    columns={"encounters": COLUMNS, "billing": ("id", "encounter_id", "code", "amount_cents")},
)

EFFECT: Final = Effect(
    record_written=RecordWritten(
        table="encounters",
        selector={"patient_id": "p1", "type": "Triage"},
        expected_count=1,
        forbid_collateral_loss=True,
        forbid_stray_writes=True,
    ),
    field_equals=(FieldEquals("note", ParamRef("note")),),
)

ORACLE: Final = OracleSpec(
    channel="sqlite_all_tables",
    tables=(),
    isolated_from_agent=True,
    trial_unique_payload=True,
    adversarially_audited=False,
)
"""``tables=()``: every table the schema lists, discovered on each read."""

C3 = Category.C3_OPTIMISTIC_THEN_REJECT
SCENARIOS: Final[tuple[tuple[str, Category, bool], ...]] = (
    ("ok", Category.CONTROL, True),
    ("no_persist", Category.C7_SILENT_NOOP_WRONG_TARGET, False),
    ("partial", Category.C1_PARTIAL_SAVE, False),
    ("duplicate", Category.C2_DUPLICATE_SUBMISSION, False),
    ("wrong_record", Category.C6_WRONG_RECORD_HOMONYM, False),
    ("stale", Category.C4_STALE_OVERWRITE, False),
    ("collateral_unaudited", Category.C7_SILENT_NOOP_WRONG_TARGET, False),
    ("optimistic", C3, False),
    ("session", C3, False),
    ("timeout", C3, True),
)
"""(scenario, category, correct action available), in the ladder's order."""


def _task(mode: str, category: Category, correct_action_available: bool) -> TaskSpec:
    return TaskSpec(
        task_id=f"{PREFIX}{mode}",
        title=f"Read-path ladder: {mode.replace('_', ' ')}",
        substrate=Substrate.WEB,
        category=category,
        goal=GOAL,
        expected_effect=EFFECT,
        oracle=ORACLE,
        correct_action_available=correct_action_available,
        params={"note": "triage note {tag}", "record_key": "key-{tag}"},
        initial_state={"encounters": STALE_SEED} if mode == "stale" else {},
        solution={
            "patient_id": "p1",
            "type": "Triage",
            "note": ParamRef("note"),
            "key": ParamRef("record_key"),
        },
        fixture={"mode": mode},
        reversible=False,
        effect_declared=True,
        split=Split.DEV,
    )


LADDER_TASKS: Final[tuple[TaskSpec, ...]] = tuple(_task(*s) for s in SCENARIOS)

LADDER_SWER: Final[Mapping[str, int]] = MappingProxyType(
    {"screen": 54, "effect_rest": 9, "effect_full": 0}
)
"""Silent wrong effects out of 90 episodes (10 scenarios x 9 trials) per arm."""


def _all_tables_oracle(path: Path) -> Oracle:
    return SqliteAllTablesOracle(path)


def _ro_channel(path: Path) -> Mapping[str, str]:
    return {SQLITE_RO_CHANNEL: str(path)}


LADDER_PACK: Final = PackDef(
    tasks=LADDER_TASKS,
    faults=LADDER_FAULTS,
    schema=LADDER_SCHEMA,
    channels=_ro_channel,
    oracle=_all_tables_oracle,
    submit_timeout_s=SUBMIT_TIMEOUT_S,
)


class MockMedLadderProvider(MockMedProvider):
    """Ten scenarios behind a save banner, a REST readback and a read-only SQL channel."""

    name: str = "mockmed-ladder"
    version: str = VERSION
    pack = LADDER_PACK
