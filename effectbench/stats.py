"""Old import path, kept so existing imports work: the code lives in `effectbench.scoring.stats`."""

from effectbench.scoring.stats import *
