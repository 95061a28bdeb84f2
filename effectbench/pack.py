"""Old import path, kept so existing imports work: the code lives in `effectbench.audit.pack`."""

from effectbench.audit.pack import *
