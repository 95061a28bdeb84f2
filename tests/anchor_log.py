"""The MockMed anchor run's event log with its timing taken out, for the golden test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from effectbench.api import evaluate

GOLDEN = Path(__file__).parent / "golden" / "anchor-events.jsonl"


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not k.endswith("_ms")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def untimed_log(log: Path) -> bytes:
    """Each line without ``ts``, ``h`` (it covers ``ts``), ``run_id`` and ``*_ms`` keys, key
    order kept: everything else is the bytes the scheduler wrote."""
    out = []
    for line in log.read_bytes().splitlines():
        event = orjson.loads(line)
        del event["ts"], event["h"]
        event["data"] = _untimed(event["data"])
        event["data"].pop("run_id", None)
        out.append(orjson.dumps(event))
    return b"\n".join(out) + b"\n"


def anchor_log(out: Path) -> bytes:
    """One trial of both baselines on the anchor, one episode at a time (a fixed order)."""
    result = evaluate(["screen_only", "effect_verified"], trials=1, concurrency=1, out=out)
    return untimed_log(result.log_path)


if __name__ == "__main__":  # regenerate: .venv/bin/python tests/anchor_log.py
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        GOLDEN.write_bytes(anchor_log(Path(tmp) / "run"))
