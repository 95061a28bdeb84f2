"""Old import path, kept so existing imports work: the code lives in `effectbench.cli.logsetup`."""

from effectbench.cli.logsetup import *
