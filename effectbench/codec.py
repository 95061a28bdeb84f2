"""Old import path ``effectbench.codec``: the code lives in ``effectbench.core.codec``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.core.codec": (
            "T",
            "converter",
            "from_json",
            "structure_any_effect",
            "structure_effect_resolved",
            "structure_snapshot",
            "to_json",
            "unstructure_diff",
        ),
        "effectbench.core.model": (
            "AnyEffect",
            "Category",
            "Delete",
            "DiffEffect",
            "Effect",
            "FieldEquals",
            "Insert",
            "InvalidSpec",
            "OracleSpec",
            "ParamRef",
            "RecordWritten",
            "Snapshot",
            "Split",
            "Substrate",
            "TaskSpec",
            "Update",
            "Value",
            "plain_value",
            "plain_values",
        ),
    },
)
