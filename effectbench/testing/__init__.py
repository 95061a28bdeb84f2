"""What a plugin's own tests need: the provider contract as a test base to subclass, an
in-memory provider, small arms, the audit as one call, the real CLI as a subprocess, and
run comparison without timing. Public and typed; docs/writing-a-provider.md ("Testing
your provider") and docs/writing-an-arm.md describe it. The pytest fixtures are in
``effectbench.testing.pytest_plugin``, loaded automatically by pytest.
"""

from __future__ import annotations

from effectbench.testing.arms import HangingArm, NoopArm, RaisingArm, ScriptedArm, SleepArm
from effectbench.testing.cli import effectbench_command, run_cli
from effectbench.testing.contract import ProviderContract
from effectbench.testing.memory import (
    MODES,
    InMemoryProvider,
    MemoryForm,
    MemoryStore,
    every_mode,
    memory_task,
)
from effectbench.testing.runs import audit_report, strip_timing, untimed_run

__all__ = [
    "MODES",
    "HangingArm",
    "InMemoryProvider",
    "MemoryForm",
    "MemoryStore",
    "NoopArm",
    "ProviderContract",
    "RaisingArm",
    "ScriptedArm",
    "SleepArm",
    "audit_report",
    "effectbench_command",
    "every_mode",
    "memory_task",
    "run_cli",
    "strip_timing",
    "untimed_run",
]
