"""Old import path ``effectbench.stats``: the code lives in ``effectbench.scoring.stats``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.scoring.stats": (
            "Interval",
            "McNemar",
            "MeanInterval",
            "Rate",
            "Z95",
            "clustered_mean",
            "describe",
            "mcnemar",
            "newcombe_independent",
            "newcombe_paired",
            "paired_phi",
            "pass_at_k",
            "pass_hat_k",
            "percentile",
            "task_level_mean",
            "wilson",
        ),
        "effectbench.core.bounds": ("safe_fsum",),
    },
)
