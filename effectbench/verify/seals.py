"""What a sound run may be called beyond sound: complete (it measured enough) and
contained (no agent ran outside containment).

Both come from the re-derived artifacts and the log, never from the files under check.
*Complete*: every arm scored at least one episode and at least the threshold the run
recorded (``run --min-coverage``, docs/exit-codes.md). *Contained*: every arm ran
isolated, or is harness code. A protocol agent (``exec:``) that ran as a plain
subprocess is not contained; neither is an in-process arm that the harness does not ship,
since it runs with the harness's own rights. An in-process arm the plan records as
shipped by the ``effectbench`` distribution (its ``arm_versions`` entry,
``effectbench==<version>``: the reference, the baselines, the adversaries, the ladder,
``llm``, the testing kit's arms) is harness code, trusted as the harness is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from effectbench.core.versions import HARNESS_DISTRIBUTION, harness_shipped
from effectbench.outputs.coverage import arm_coverage, shortfalls

__all__ = ["HARNESS_DISTRIBUTION", "coverage_lines", "harness_shipped", "uncontained_arms"]


def uncontained_arms(
    execution: Any, arms: Sequence[Any], arm_versions: Mapping[str, Any] | None
) -> list[str]:
    """The arms that ran neither isolated nor as harness code, in the plan's order."""
    modes = execution if isinstance(execution, Mapping) else {}
    versions = arm_versions if isinstance(arm_versions, Mapping) else {}
    out = []
    for arm in arms:
        mode = modes.get(arm)
        if mode == "isolated":
            continue
        if mode == "in_process" and harness_shipped(versions.get(arm)):
            continue
        out.append(str(arm))
    return out


def coverage_lines(
    metrics: Mapping[str, Any], threshold: float, results: Path | None
) -> tuple[list[str], list[str]]:
    """(one coverage line per arm, one line per arm short of ``threshold``)."""
    every = [f"{c.arm} {c.figures()}" for c in arm_coverage(metrics)]
    short = [s.line() for s in shortfalls(metrics, threshold, results)]
    return every, short
