"""Old import path, kept so existing imports work: the code lives in `effectbench.core.arm`."""

from effectbench.core.arm import *
