"""EffectBench: score what automation agents really did to the system of record.

The package root stays import-light (``effectbench --version`` imports only this and
click); the public API is re-exported lazily from its modules on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from effectbench.core.versions import PACKAGE_VERSION as __version__

_LAZY = {
    "evaluate": "effectbench.api",
    "evaluate_async": "effectbench.api",
    "evaluate_provider": "effectbench.api",
    "evaluate_provider_async": "effectbench.api",
    "RunResult": "effectbench.api",
    "RunError": "effectbench.api",
    "RunRequest": "effectbench.run.request",
    "RunOptions": "effectbench.run.options",
    "Arm": "effectbench.core.arm",
    "TaskView": "effectbench.core.arm",
    "BenchmarkProvider": "effectbench.core.provider",
    "EnvHandle": "effectbench.core.provider",
    "Oracle": "effectbench.core.provider",
    "ProductDriver": "effectbench.core.provider",
    "ProductResponse": "effectbench.core.provider",
    "ProductVerifier": "effectbench.core.provider",
    "ProvisionedEpisode": "effectbench.core.provider",
    "SkipEpisode": "effectbench.core.provider",
    "Telemetry": "effectbench.core.provider",
    "ModelCall": "effectbench.core.provider",
    "AgentReport": "effectbench.core.model",
    "Effect": "effectbench.core.model",
    "FieldEquals": "effectbench.core.model",
    "OracleSpec": "effectbench.core.model",
    "ParamRef": "effectbench.core.model",
    "RecordWritten": "effectbench.core.model",
    "Snapshot": "effectbench.core.model",
    "TaskSpec": "effectbench.core.model",
}

if TYPE_CHECKING:
    from effectbench.api import (
        RunError,
        RunResult,
        evaluate,
        evaluate_async,
        evaluate_provider,
        evaluate_provider_async,
    )
    from effectbench.core.arm import Arm, TaskView
    from effectbench.core.model import (
        AgentReport,
        Effect,
        FieldEquals,
        OracleSpec,
        ParamRef,
        RecordWritten,
        Snapshot,
        TaskSpec,
    )
    from effectbench.core.provider import (
        BenchmarkProvider,
        EnvHandle,
        ModelCall,
        Oracle,
        ProductDriver,
        ProductResponse,
        ProductVerifier,
        ProvisionedEpisode,
        SkipEpisode,
        Telemetry,
    )
    from effectbench.run.options import RunOptions
    from effectbench.run.request import RunRequest


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'effectbench' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "AgentReport",
    "Arm",
    "BenchmarkProvider",
    "Effect",
    "EnvHandle",
    "FieldEquals",
    "ModelCall",
    "Oracle",
    "OracleSpec",
    "ParamRef",
    "ProductDriver",
    "ProductResponse",
    "ProductVerifier",
    "ProvisionedEpisode",
    "RecordWritten",
    "RunError",
    "RunOptions",
    "RunRequest",
    "RunResult",
    "SkipEpisode",
    "Snapshot",
    "TaskSpec",
    "TaskView",
    "Telemetry",
    "__version__",
    "evaluate",
    "evaluate_async",
    "evaluate_provider",
    "evaluate_provider_async",
]
