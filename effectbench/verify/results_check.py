"""results.jsonl against the results rebuilt from the log, row by row, in flat memory.

The rebuilt rows are indexed on disk (``Scratch``) by episode id, so each given row is
matched to its rebuilt twin by a seek, and only the two rows at hand are ever parsed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from effectbench.outputs.artifacts import RESULTS_FILE
from effectbench.verify.compare import LABEL_FIELDS, Reasons, compare
from effectbench.verify.scratch import Scratch

__all__ = ["compare_results"]


def _lines(f: IO[bytes]) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, line) of a file."""
    offset = 0
    for n, line in enumerate(f, 1):
        yield n, offset, line
        offset += len(line)


def _row(line: bytes) -> dict[str, Any] | None:
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None


def _index(f: IO[bytes]) -> Iterator[tuple[str, int, int]]:
    for n, offset, line in _lines(f):
        row = _row(line)
        assert row is not None, "the rebuilt results are written by this package"
        yield str(row["episode_id"]), n, offset


def _compare_row(n: int, row: dict[str, Any], expected: dict[str, Any], reasons: Reasons) -> None:
    source, ep = RESULTS_FILE, row["episode_id"]
    for field in LABEL_FIELDS:
        if row.get(field) != expected.get(field):
            reasons.add(
                source,
                f"line {n} ({ep}): {field} {row.get(field)!r} but the log re-derives "
                f"{expected.get(field)!r}",
            )
    rest_claimed = {k: v for k, v in row.items() if k not in LABEL_FIELDS}
    rest_actual = {k: v for k, v in expected.items() if k not in LABEL_FIELDS}
    compare(rest_claimed, rest_actual, f"line {n} ({ep})", source, reasons)


def compare_results(given: Path, rebuilt: Path, scratch: Scratch, reasons: Reasons) -> None:
    """Every way ``given`` differs from ``rebuilt``: rows not rows, doubled, foreign,
    out of plan order, with other labels or values, or missing."""
    source = RESULTS_FILE
    if not given.is_file():
        reasons.add(source, "missing")
        return
    with open(rebuilt, "rb") as want:
        scratch.index_rows(_index(want))
        with open(given, "rb") as f:
            for n, _, line in _lines(f):
                row = _row(line)
                if row is None or not isinstance(row.get("episode_id"), str):
                    reasons.add(source, f"line {n} is not a results row")
                    continue
                ep = row["episode_id"]
                found = scratch.see_row(ep)
                if found is None:
                    reasons.add(source, f"line {n}: episode {ep} is not in the log")
                    continue
                expected_line, offset, seen = found
                if seen:
                    reasons.add(source, f"line {n}: episode {ep} appears twice")
                    continue
                if expected_line != n:
                    reasons.add(
                        source,
                        f"line {n}: episode {ep} belongs on line {expected_line} (plan order)",
                    )
                want.seek(offset)
                expected = _row(want.readline())
                assert expected is not None
                _compare_row(n, row, expected, reasons)
    for ep, n in scratch.unseen_rows():
        reasons.add(source, f"episode {ep} (line {n} of the rebuilt results) is missing")
