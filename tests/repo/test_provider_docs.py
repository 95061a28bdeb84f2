"""docs/writing-a-provider.md lists every field of every public type a provider author
meets, and nothing that is not there: a field added to the code without a line in the
reference fails here, and so does a documented field that no longer exists."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from effectbench.arm import TaskView
from effectbench.model import (
    AgentReport,
    Category,
    Delete,
    DiffEffect,
    Effect,
    FieldEquals,
    Insert,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Snapshot,
    TaskSpec,
    Update,
)
from effectbench.provider import (
    ActionRecord,
    EnvHandle,
    ModelCall,
    ProductDriver,
    ProductResponse,
    ProductVerifier,
    ProvisionedEpisode,
    Telemetry,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-a-provider.md"
REFERENCE = "## Reference: every public type"


def _public_module(cls: type) -> str:
    """The documented home of a type: the public plugin module that exports it (its
    implementation lives in effectbench.core)."""
    import effectbench.arm
    import effectbench.model
    import effectbench.provider

    for module in (effectbench.model, effectbench.provider, effectbench.arm):
        if getattr(module, cls.__name__, None) is cls:
            return module.__name__
    return cls.__module__


TYPES: list[type] = [
    TaskSpec,
    Effect,
    RecordWritten,
    FieldEquals,
    DiffEffect,
    Insert,
    Update,
    Delete,
    ParamRef,
    OracleSpec,
    Snapshot,
    ProvisionedEpisode,
    EnvHandle,
    ProductDriver,
    ProductResponse,
    ProductVerifier,
    Telemetry,
    ActionRecord,
    ModelCall,
    AgentReport,
    TaskView,
]


def _reference_tables() -> dict[str, list[str]]:
    """Qualified type name -> the names in the first column of the table after it."""
    text = DOC.read_text()
    assert REFERENCE in text, f"{DOC.name} has no '{REFERENCE}' section"
    section = text.split(REFERENCE, 1)[1].split("\n## ", 1)[0]
    tables: dict[str, list[str]] = {}
    current: str | None = None
    for line in section.splitlines():
        named = re.search(r"`(effectbench\.[\w.]+)`", line)
        if named and not line.startswith("|"):
            current = named.group(1)
            tables.setdefault(current, [])
            continue
        cell = re.match(r"^\| `(\w+)` \|", line)
        if cell and current is not None:
            tables[current].append(cell.group(1))
    return tables


def _members(cls: type) -> set[str]:
    if attrs.has(cls):
        return {a.name for a in attrs.fields(cls)}
    return {n for n in vars(cls) if not n.startswith("_")}  # a protocol's methods


@pytest.mark.parametrize("cls", TYPES, ids=lambda c: c.__name__)
def test_every_field_of_the_type_is_documented_and_nothing_else(cls: type) -> None:
    qualified = f"{_public_module(cls)}.{cls.__name__}"
    tables = _reference_tables()
    assert qualified in tables, f"no table for {qualified} in {DOC.name}"
    documented = tables[qualified]
    assert len(documented) == len(set(documented)), f"{qualified}: a row appears twice"
    missing = _members(cls) - set(documented)
    assert not missing, f"{qualified}: fields not documented: {sorted(missing)}"
    unknown = [
        n for n in documented if n not in _members(cls) and not callable(getattr(cls, n, None))
    ]
    assert not unknown, f"{qualified}: documented but not in the code: {unknown}"


def test_the_page_answers_the_questions_authors_asked() -> None:
    text = DOC.read_text()
    assert "## Refusal controls" in text and "never `control`" in text
    assert "## Alternatives: confusable records and valid values" in text
    assert "`Alternatives.values`" in text or "`values` (the `alternatives` channel" in text
    assert "**their order is not kept**" in text and "`TaskSpec.params`" in text
    assert "| `channel` | `str` |" in text


def test_the_category_table_lists_the_enums_members_and_nothing_else() -> None:
    """ "The categories" names every member of Category with its value, in the enum's
    order: a member added, renamed or removed in the code fails here until the page says so."""
    text = DOC.read_text()
    section = text.split("### The categories", 1)[1].split("\n\n", 3)[2]
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \|", section, re.MULTILINE)
    assert rows == [(c.name, c.value) for c in Category]
