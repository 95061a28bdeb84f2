"""Running the audit: the reference arm and every adversary over every task of a
provider, through the ordinary API, then the checks over the log that run wrote.

Above the API (it runs a whole evaluation); the checks themselves (checks.py) only read
a log, so the artifact build and the verifier can use them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from effectbench.audit import checks, roster
from effectbench.audit.checks import AuditError
from effectbench.audit.report import AUDIT_FILE, AuditReport
from effectbench.audit.roster import DEFAULT_TRIALS
from effectbench.core.model import TaskSpec
from effectbench.core.provider import BenchmarkProvider
from effectbench.run.defaults import DEFAULTS

__all__ = ["audit_provider"]


def _listed_tasks(
    provider: BenchmarkProvider | str, registry: Any, globs: Sequence[str]
) -> Sequence[TaskSpec]:
    """The tasks the audit will run, listed before the run to size the per-field attacks
    (a provider named by entry point is loaded once more, only to list them)."""
    from effectbench.run.plan import select_tasks
    from effectbench.run.registry import Registry

    listing = (registry or Registry()).provider(provider) if isinstance(provider, str) else provider
    try:
        tasks = list(listing.tasks())
    except Exception as exc:  # noqa: BLE001 - third-party code; reported as one line
        raise AuditError(
            f"provider {listing.name!r} failed to list its tasks: {type(exc).__name__}: {exc}"
        ) from None
    return select_tasks(tasks, globs)


async def audit_provider(
    provider: BenchmarkProvider | str,
    *,
    out_dir: str | os.PathLike[str] | None,
    trials: int = DEFAULT_TRIALS,
    concurrency: int = DEFAULTS.audit_concurrency,
    force: bool = False,
    registry: Any = None,
    provider_timeout: float | None = None,
    task_globs: Sequence[str] = (),
    limit: int | None = None,
) -> AuditReport:
    """Run the reference and every adversary over every task, then audit the log.

    The run is an ordinary run directory in ``out_dir`` (None: ``runs/<run-id>/``); the
    report is also written there as ``audit.json``, so the attestations travel with
    their evidence. ``provider_timeout`` None: the provider's ``provisioning_timeout``,
    else the run's default. ``limit``: only the first N tasks of the selection, in pack
    order, as ``run --limit`` takes them (None: all).
    """
    from effectbench.api import RunError, evaluate_provider_async
    from effectbench.run.outdir import lost

    if (
        out_dir is not None
        and not force
        and Path(out_dir).is_dir()
        and any(Path(out_dir).iterdir())
    ):
        raise AuditError(
            f"audit directory {out_dir} already exists and is not empty; choose another --out or "
            "pass --force to replace it"
        )
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise AuditError(f"--limit must be a positive integer, got {limit}")
    names = roster.value_arm_names(_listed_tasks(provider, registry, task_globs)[:limit])
    diffs = set(roster.DIFF_ADVERSARY_NAMES) <= set(names)
    fields = len(names) - (len(roster.DIFF_ADVERSARY_NAMES) if diffs else 0)
    try:
        result = await evaluate_provider_async(
            roster.audit_arms(fields, diffs),
            provider,
            trials=trials,
            concurrency=concurrency,
            out=out_dir,
            force=force,
            registry=registry,
            provider_timeout=provider_timeout,
            task_globs=task_globs,
            limit=limit,
        )
    except RunError as exc:
        raise AuditError(str(exc)) from None
    if result.interrupted:
        raise AuditError(f"the audit run in {result.run_dir} was interrupted; run the audit again")
    report = checks.audit_log(result.log_path)
    if result.outcome is not None and report.final_hash != result.outcome.final_hash:
        raise lost(result.run_dir)  # replaced after the run: that log is another run's
    (result.run_dir / AUDIT_FILE).write_bytes(
        orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )
    return report
