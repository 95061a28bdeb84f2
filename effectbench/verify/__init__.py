"""Old import path, kept so existing imports work: the code lives in `effectbench.verify.run_check`."""

from effectbench.verify.run_check import *
