"""Pytest fixtures for plugin authors, loaded automatically wherever effectbench is
installed (the ``pytest11`` entry point ``effectbench``; ``-p no:effectbench`` turns it
off). Do not also list it in ``pytest_plugins``: it would be registered twice.

Importing this module costs nothing: the fixtures import the harness when used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def effectbench_audit(tmp_path: Path) -> Callable[..., Any]:
    """``effectbench_audit(provider, **kw)`` runs the audit into a fresh directory under
    ``tmp_path`` and returns its ``AuditReport`` (keywords of
    ``effectbench.testing.audit_report``)."""
    from effectbench.testing.runs import audit_report

    count = iter(range(1_000_000))

    def audit(provider: Any, **kw: Any) -> Any:
        return audit_report(provider, tmp_path / f"audit{next(count)}", **kw)

    return audit


@pytest.fixture
def effectbench_run(tmp_path: Path) -> Callable[..., Any]:
    """``effectbench_run(arms, provider, trials=1, **kw)`` runs an evaluation into a fresh
    directory under ``tmp_path`` and returns its ``RunResult`` (keywords of
    ``effectbench.api.evaluate_provider``)."""
    from effectbench.api import evaluate_provider

    count = iter(range(1_000_000))

    def run(arms: Any, provider: Any, *, trials: int = 1, **kw: Any) -> Any:
        return evaluate_provider(
            arms, provider, trials=trials, out=tmp_path / f"run{next(count)}", **kw
        )

    return run
