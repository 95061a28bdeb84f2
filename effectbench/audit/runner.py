"""Running the audit: the reference arm and every adversary over every task of a
provider, through the ordinary API, then the checks over the log that run wrote.

Above the API (it runs a whole evaluation); the checks themselves (checks.py) only read
a log, so the artifact build and the verifier can use them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from effectbench.audit import checks
from effectbench.audit.checks import AUDIT_FILE, DEFAULT_TRIALS, AuditError, AuditReport
from effectbench.core.provider import BenchmarkProvider

__all__ = ["audit_provider"]


async def audit_provider(
    provider: BenchmarkProvider | str,
    *,
    out_dir: str | os.PathLike[str] | None,
    trials: int = DEFAULT_TRIALS,
    concurrency: int = 16,
    force: bool = False,
    registry: Any = None,
    provider_timeout: float = 60.0,
) -> AuditReport:
    """Run the reference and every adversary over every task, then audit the log.

    The run is an ordinary run directory in ``out_dir`` (None: ``runs/<run-id>/``); the
    report is also written there as ``audit.json``, so the attestations travel with
    their evidence.
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
            f"audit directory {out_dir} already exists and is not empty; choose another --out or pass --force "
            "to replace it"
        )
    try:
        result = await evaluate_provider_async(
            checks.audit_arms(),
            provider,
            trials=trials,
            concurrency=concurrency,
            out=out_dir,
            force=force,
            registry=registry,
            provider_timeout=provider_timeout,
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
