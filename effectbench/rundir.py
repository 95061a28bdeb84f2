"""Old import path ``effectbench.rundir``: it re-exports ``effectbench.run.outdir`` (the
``--force`` guard of a run's output directory), NOT ``effectbench.core.rundir`` (the
names of a run directory's files, ``RunDir``). Every name warns and names both; the
path goes in effectbench 0.3 (docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.run.outdir": (
            "LOG_NAME",
            "OutDirError",
            "RunDirLost",
            "check_still_ours",
            "lost",
            "prepare_out_dir",
        ),
        "effectbench.core.rundir": ("RUN_FILES",),
    },
    see="the run directory's file names (RunDir, LOG_FILE) are in effectbench.core.rundir",
)
