"""Arm-versus-arm comparison, paired by (task, trial).

Arms see the same tasks with the same trial payloads, so the honest comparison is
paired: McNemar on the discordant pairs, a Newcombe paired interval, and an
interval clustered on the task (trials of one task are correlated). A pair enters
only when both arms' episodes are eligible; pairs lost that way are counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from effectbench.scoring.stats import Z95, clustered_mean, mcnemar, newcombe_paired

Pair = tuple[bool, bool]
"""(first arm's indicator, second arm's indicator) for one (task, trial)."""


def paired_difference(by_task: Sequence[Sequence[Pair]], z: float = Z95) -> dict[str, Any]:
    """first - second for one binary metric over eligible pairs, grouped by task."""
    both = first_only = second_only = neither = 0
    clusters: list[tuple[int, float, float]] = []
    for pairs in by_task:
        s = 0
        for x, y in pairs:
            if x and y:
                both += 1
            elif x:
                first_only += 1
                s += 1
            elif y:
                second_only += 1
                s -= 1
            else:
                neither += 1
        if pairs:
            # per-pair difference is -1, 0 or 1, so its square is the discordant count
            discordant = sum(1 for x, y in pairs if x != y)
            clusters.append((len(pairs), float(s), float(discordant)))
    n = both + first_only + second_only + neither
    ci = newcombe_paired(both, first_only, second_only, neither, z)
    clustered = clustered_mean(clusters, z, bounds=(-1.0, 1.0))
    return {
        "n_pairs": n,
        "first_rate": ((both + first_only) / n) if n else None,
        "second_rate": ((both + second_only) / n) if n else None,
        "difference": ((first_only - second_only) / n) if n else None,
        "table": {
            "both": both,
            "first_only": first_only,
            "second_only": second_only,
            "neither": neither,
        },
        "ci95": None if ci is None else [ci[0], ci[1]],
        "ci95_method": "newcombe_paired",
        "mcnemar": mcnemar(first_only, second_only).to_json(),
        "task_clustered": clustered.to_json(),
    }


def compare_arms(
    first: str,
    second: str,
    swer: Sequence[Sequence[Pair]],
    task_success: Sequence[Sequence[Pair]],
    planned_pairs: int,
    z: float = Z95,
    over_halt: Sequence[Sequence[Pair]] | None = None,
) -> dict[str, Any]:
    """One comparison block: SWER (with over-halt, when given) and task success,
    first minus second. An arm can lower SWER by halting, so the SWER difference is
    not read without the over-halt one."""
    swer_block = paired_difference(swer, z)
    n = swer_block["n_pairs"]
    out = {
        "first": first,
        "second": second,
        "pairs_planned": planned_pairs,
        "pairs_eligible": n,
        "pair_coverage": (n / planned_pairs) if planned_pairs else None,
        "swer": swer_block,
        "task_success": paired_difference(task_success, z),
    }
    if over_halt is not None:
        out["over_halt"] = paired_difference(over_halt, z)
    return out
