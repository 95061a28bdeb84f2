"""The ``effectbench`` command (commands.py) and what it renders and configures.

``main``, the console script's entry point (``effectbench.cli:main`` in pyproject.toml),
stays here for good. Every other name is the old module ``effectbench.cli``: it warns
(DeprecationWarning) and goes in effectbench 0.3 (docs/deprecations.md). Nothing is
imported until a name is asked for, so importing ``effectbench.cli.logsetup`` does not
load the commands.
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.cli.commands": (
            "EXIT_INTERRUPTED",
            "EXIT_USAGE",
            "arms",
            "audit",
            "cli",
            "compare",
            "export",
            "flag_message",
            "os_error_line",
            "pack",
            "providers",
            "reference",
            "report",
            "rescore",
            "run",
            "verify",
        ),
        "effectbench.core.rundir": (
            "LOG_FILE",
            "RunDir",
        ),
        "effectbench.core.versions": ("PACKAGE_VERSION",),
        "effectbench.run.options": (
            "DEFAULTS",
            "OptionsError",
        ),
    },
    kept={"effectbench.cli.commands": ("main",)},
)
