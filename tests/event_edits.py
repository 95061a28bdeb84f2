"""Test helpers shared by several test modules (moved from test_audit.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson


def _rechain(events: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write events as a well-formed log (seq renumbered, hash chain recomputed): what
    anyone can produce without a secret, so the audit must not trust its claims."""
    from effectbench.log.reader import encode_line

    prev, out = "0" * 64, []
    for seq, e in enumerate(events):
        line, prev = encode_line(prev, seq, e["type"], e["ts"], e["ep"], e["data"])
        out.append(line)
    path.write_bytes(b"".join(out))
    return path


def _events(log: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in log.read_bytes().splitlines()]
