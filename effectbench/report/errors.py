"""The report's one error type, in a leaf module so every report module can raise it."""

from __future__ import annotations

from effectbench.core.errors import EffectBenchError

__all__ = ["ReportError"]


class ReportError(EffectBenchError):
    """The report cannot be built; the message says what is wrong and what to do."""
