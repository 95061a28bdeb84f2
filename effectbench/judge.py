"""Old import path, kept so existing imports work: the code lives in `effectbench.scoring.judge`."""

from effectbench.scoring.judge import *
