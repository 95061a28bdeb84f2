"""The attester a caller passes into the artifact build (``attest=``).

Loads the audit's checks only when the build asks for the attestations, after its pass
over the log: a large rescore forks a worker first, and the worker has no use for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["attestations"]


def attestations(arms: Sequence[str], log_path: Path) -> dict[str, Any]:
    """effectbench.audit.checks.attestations, imported on first use."""
    from effectbench.audit import checks

    return checks.attestations(arms, log_path)
