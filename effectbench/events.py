"""Old import path ``effectbench.events``: the code lives in ``effectbench.core.events``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.core.events": (
            "ArmAction",
            "ArmScreenshot",
            "ArmStarted",
            "ArmTelemetry",
            "EVENT_TYPES",
            "EpisodeAbandoned",
            "EpisodeFailed",
            "EpisodeFinished",
            "EpisodePlanned",
            "EpisodeProvisioned",
            "Injected",
            "MutationPlanned",
            "MutationRead",
            "PostRead",
            "PreSnapshot",
            "ReferencePostRead",
            "ReferencePreSnapshot",
            "Reported",
            "RunFinished",
            "RunResumed",
            "RunStarted",
            "SCHEMA_ID",
            "SCHEMA_MAJOR",
            "TERMINAL_TYPES",
            "event_data",
        ),
        "effectbench.core.model": (
            "FailureClass",
            "JSONScalar",
        ),
    },
)
