"""Old import path, kept so existing imports work: the code lives in `effectbench.core.events`."""

from effectbench.core.events import *
