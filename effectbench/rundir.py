"""Old import path, kept so existing imports work: the code lives in `effectbench.run.outdir`."""

from effectbench.run.outdir import *
