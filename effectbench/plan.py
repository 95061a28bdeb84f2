"""Old import path ``effectbench.plan``: the code lives in ``effectbench.run.plan``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.run.plan": (
            "EpisodeSpec",
            "Plan",
            "PlanError",
            "ProviderInfo",
            "RESOLVE_CACHE_MAX",
            "build_plan",
            "count_planned",
            "default_versions",
            "diff_plans",
            "episode_id",
            "episodes",
            "hash_identity",
            "pack_fingerprint",
            "select_tasks",
        ),
    },
)
