"""Old import path, kept so existing imports work: the code lives in `effectbench.core.codec`."""

from effectbench.core.codec import *
