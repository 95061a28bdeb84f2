"""What ``providers``, ``arms`` and ``tasks`` print: a plain-text table for a person, or
JSON (``--json``) for a script. Imports only click and orjson when asked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import click

__all__ = ["TASK_COLUMNS", "emit_json", "json_option", "task_rows", "task_table", "text_table"]

TASK_COLUMNS: Final = ("id", "title", "category", "substrate", "split", "reversible", "declared")
"""The columns of ``effectbench tasks`` (and the keys of its ``--json`` rows)."""

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def emit_json(value: Any) -> None:
    import orjson

    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def text_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns padded to their widest cell; the last is left ragged."""
    table = [tuple(header), *(tuple(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths)), row[-1]]).rstrip()
        for row in table
    )


def _yes_no(value: object) -> str | bool:
    return value if isinstance(value, bool) else "sealed"


def task_rows(tasks: Iterable[Any]) -> list[dict[str, Any]]:
    """One row per task, in pack order, with what the public pack shows of it: a
    test-split task's reversible and declared are ``"sealed"``, as in the public pack."""
    from effectbench.core.redaction import is_sealed

    rows = []
    for task in tasks:
        sealed = is_sealed(task.split)
        row: Mapping[str, Any] = {
            "id": task.task_id,
            "title": task.title,
            "category": str(task.category),
            "substrate": str(task.substrate),
            "split": str(task.split),
            "reversible": _yes_no(None if sealed else task.reversible),
            "declared": _yes_no(None if sealed else task.effect_declared),
        }
        rows.append(dict(row))
    return rows


def task_table(rows: Sequence[Mapping[str, Any]]) -> str:
    def cell(value: object) -> str:
        return ("yes" if value else "no") if isinstance(value, bool) else str(value)

    header = [c.upper() for c in TASK_COLUMNS]
    return text_table(header, ([cell(row[c]) for c in TASK_COLUMNS] for row in rows))
