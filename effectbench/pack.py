"""Old import path ``effectbench.pack``: the code lives in ``effectbench.audit.pack``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.audit.pack": (
            "PACK_SCHEMA",
            "PackError",
            "public_pack_manifest",
            "public_task_entry",
        ),
        "effectbench.core.redaction": (
            "SEALED_KEYS",
            "redact_task_entry",
        ),
        "effectbench.run.plan": ("pack_fingerprint",),
    },
)
