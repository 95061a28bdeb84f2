"""Old import path, kept so existing imports work: the code lives in `effectbench.audit.checks`."""

from effectbench.audit.checks import *
