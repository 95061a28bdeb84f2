"""Old import path ``effectbench.parallel``: the code lives in ``effectbench.outputs.parallel``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.outputs.parallel": (
            "MIN_PARALLEL_BYTES",
            "cpu_count",
            "sharded_pass",
            "split_points",
            "worker_count",
        ),
    },
)
