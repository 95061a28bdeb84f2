"""Old import path ``effectbench.registry``: the code lives in ``effectbench.run.registry``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.run.registry": (
            "ARMS",
            "DuplicatePluginWarning",
            "LoadResult",
            "PROVIDERS",
            "PluginError",
            "PluginInfo",
            "PluginWarning",
            "Registry",
            "UnknownPlugin",
            "format_plugin_table",
            "instantiate",
            "missing_members",
        ),
    },
)
