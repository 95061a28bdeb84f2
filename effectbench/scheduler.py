"""Old import path, kept so existing imports work: the code lives in `effectbench.run.scheduler`."""

from effectbench.run.scheduler import *
