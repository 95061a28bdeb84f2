"""Old import path, kept so existing imports work: the code lives in `effectbench.core.model`."""

from effectbench.core.model import *
