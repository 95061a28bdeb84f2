"""``effectbench audit``: run the audit and print its verdict, with the command's exit
codes (0 audited, 1 a task failed, 2 the audit could not run)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

from effectbench.audit.checks import AuditError
from effectbench.audit.report import AuditReport, format_audit
from effectbench.audit.roster import DEFAULT_TRIALS
from effectbench.audit.runner import audit_provider
from effectbench.run.defaults import DEFAULTS

__all__ = ["audit_cli_main"]


def audit_cli_main(
    provider_name: str,
    out_dir: str | os.PathLike[str] | None,
    *,
    trials: int = DEFAULT_TRIALS,
    concurrency: int = DEFAULTS.audit_concurrency,
    force: bool = False,
    task_globs: Sequence[str] = (),
    limit: int | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    provider_timeout: float | None = None,
) -> int:
    """``effectbench audit --provider NAME``: 0 when every task is audited, 1 with the
    reasons when any task fails, 2 (one line on stderr) when the audit cannot run.
    ``limit``: only the first N tasks ``task_globs`` select, in pack order (None: all)."""
    import anyio

    from effectbench.run.outdir import RunDirLost
    from effectbench.run.plan import PlanError
    from effectbench.run.registry import PluginError

    out, err = stdout or sys.stdout, stderr or sys.stderr
    if trials < 1:
        print(f"effectbench audit: --trials must be a positive integer, got {trials}", file=err)
        return 2
    if provider_timeout is not None and not provider_timeout > 0:
        print(
            "effectbench audit: --provider-timeout must be a positive number of seconds, "
            f"got {provider_timeout}",
            file=err,
        )
        return 2

    async def go() -> AuditReport:
        return await audit_provider(
            provider_name,
            out_dir=out_dir,
            trials=trials,
            concurrency=concurrency,
            force=force,
            provider_timeout=provider_timeout,
            task_globs=task_globs,
            limit=limit,
        )

    try:
        report = anyio.run(go)
    except (AuditError, PluginError, PlanError, RunDirLost, OSError) as exc:
        print(f"effectbench audit: error: {' '.join(str(exc).split())}", file=err)
        return 2
    print(format_audit(report), file=out)
    print(f"run directory: {report.log_path.parent.absolute()}", file=out)
    return 0 if report.ok else 1
