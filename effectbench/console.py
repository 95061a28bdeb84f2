"""Old import path, kept so existing imports work: the code lives in `effectbench.cli.console`."""

from effectbench.cli.console import *
