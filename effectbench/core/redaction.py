"""The public pack's redaction of a test-split task: shared by the public pack manifest
(effectbench.audit.pack) and a run's manifest (effectbench.outputs), which publishes
with results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from effectbench.core.model import Split

__all__ = ["SEALED_KEYS", "is_sealed", "redact_task_entry"]

SEALED_KEYS: Final = ("task_id", "title", "category", "substrate", "split")
"""The only fields a test-split task publishes."""


def is_sealed(split: object) -> bool:
    return str(split) == Split.TEST.value


def redact_task_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Apply the public redaction to an already-built task entry (e.g. a run manifest's):
    a test-split entry keeps only ``SEALED_KEYS`` and is marked sealed; others pass as is."""
    if not is_sealed(entry.get("split")):
        return dict(entry)
    kept = {k: entry[k] for k in SEALED_KEYS if k in entry}
    kept["sealed"] = True
    return kept
