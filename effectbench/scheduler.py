"""Old import path ``effectbench.scheduler``: the code lives in ``effectbench.run.scheduler``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.run.scheduler": (
            "EpisodeOutcome",
            "LOG_NAME",
            "Observer",
            "ProviderStartError",
            "RunOutcome",
            "Scheduler",
            "SchedulerOptions",
        ),
        "effectbench.run.resume": (
            "ResumeError",
            "ResumeState",
            "load_resume_state",
        ),
        "effectbench.run.runlock": (
            "run_lock_held",
            "share_run_lock",
        ),
    },
)
