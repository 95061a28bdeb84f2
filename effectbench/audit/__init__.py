"""Old import path ``effectbench.audit``: the checks (checks.py), the runner (runner.py)
and the command (effectbench.cli.audit). The runner and the command are re-exported
lazily: they sit above the API, the checks below it."""

from typing import Any

from effectbench.audit.checks import *

_LAZY = {
    "audit_provider": "effectbench.audit.runner",
    "audit_cli_main": "effectbench.cli.audit",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'effectbench.audit' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
