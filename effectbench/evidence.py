"""Old import path ``effectbench.evidence``: the code lives in ``effectbench.core.evidence``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.core.evidence": (
            "BLOB_DIR",
            "MEDIA_TYPES",
            "blob_path",
            "check_blob",
            "screenshot_event",
            "store_blob",
        ),
    },
)
