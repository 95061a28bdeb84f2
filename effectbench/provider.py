"""Old import path, kept so existing imports work: the code lives in `effectbench.core.provider`."""

from effectbench.core.provider import *
