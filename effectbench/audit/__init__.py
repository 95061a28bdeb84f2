"""Old import path ``effectbench.audit``: the checks (checks.py, which re-exports the
roster of roster.py and the report types of report.py), the runner (runner.py) and the
command (effectbench.cli.audit), re-exported lazily so that importing a light submodule
(attest.py) does not load the checks."""

import importlib
from typing import Any

_LAZY = {
    "audit_provider": "effectbench.audit.runner",
    "audit_cli_main": "effectbench.cli.audit",
}


def __getattr__(name: str) -> Any:
    module = importlib.import_module(_LAZY.get(name, "effectbench.audit.checks"))
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'effectbench.audit' has no attribute {name!r}") from None
