"""Old import path ``effectbench.artifacts``: the code lives in ``effectbench.outputs.artifacts``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.outputs.artifacts": (
            "ArtifactSet",
            "build_artifacts",
            "dump_json",
            "manifest_plan_index",
            "recompute_metrics_from_results",
            "render_summary",
            "rescore_artifacts",
            "scoring_version",
        ),
        "effectbench.core.errors": ("ArtifactError",),
        "effectbench.core.rundir": (
            "ARTIFACT_FILES",
            "LOG_FILE",
            "MANIFEST_FILE",
            "METRICS_FILE",
            "RESULTS_FILE",
            "SUMMARY_FILE",
        ),
        "effectbench.outputs.logpass": ("LogPass",),
        "effectbench.outputs.rows": (
            "TASK_AXES",
            "record_from_row",
            "record_row",
        ),
    },
)
