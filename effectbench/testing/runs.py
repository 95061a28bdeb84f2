"""Running a provider through the audit or a run from a plain (synchronous) test, and
comparing two runs with their timing taken out."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson

from effectbench.audit.report import AuditReport
from effectbench.audit.runner import audit_provider
from effectbench.core.provider import BenchmarkProvider
from effectbench.core.rundir import RunDir

__all__ = ["audit_report", "strip_timing", "untimed_run"]


def audit_report(
    provider: BenchmarkProvider | str,
    out_dir: str | os.PathLike[str],
    *,
    trials: int = 1,
    concurrency: int = 8,
    tasks: Sequence[str] = (),
    provider_timeout: float | None = None,
) -> AuditReport:
    """Run ``effectbench audit`` on ``provider`` (an instance or a registered name) into
    ``out_dir`` and return its report: ``report.ok``, and per task ``status`` and
    ``reasons`` (``effectbench.audit.report.TaskAudit``). ``tasks`` are globs, as
    ``--task``. Call it outside an event loop (from async code, await
    ``effectbench.audit.runner.audit_provider``)."""

    async def go() -> AuditReport:
        return await audit_provider(
            provider,
            out_dir=out_dir,
            trials=trials,
            concurrency=concurrency,
            task_globs=tasks,
            provider_timeout=provider_timeout,
        )

    return anyio.run(go)


def strip_timing(value: Any) -> Any:
    """Drop wall-clock keys (``*_ms``) and log-line pointers (``evidence``), recursively:
    the only fields allowed to differ between two runs of one plan."""
    if isinstance(value, dict):
        return {
            k: strip_timing(v)
            for k, v in value.items()
            if not k.endswith("_ms") and k != "evidence"
        }
    if isinstance(value, list):
        return [strip_timing(v) for v in value]
    return value


def untimed_run(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], Any]:
    """(results.jsonl rows keyed by episode id, metrics.json), without timing fields, to
    compare two runs of one plan. Fails when an episode appears twice in results.jsonl."""
    root = RunDir(Path(run_dir))
    rows = [orjson.loads(line) for line in root.results.read_bytes().splitlines() if line]
    results = {r["episode_id"]: strip_timing(r) for r in rows}
    assert len(results) == len(rows), "an episode appears twice in results.jsonl"
    return results, strip_timing(orjson.loads(root.metrics.read_bytes()))
