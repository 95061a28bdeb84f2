"""Old import path, kept so existing imports work: the code lives in `effectbench.run.registry`."""

from effectbench.run.registry import *
