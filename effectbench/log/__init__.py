"""Old import path, kept so existing imports work: the code lives in `effectbench.log.reader`."""

from effectbench.log.lines import _SLOT_SETTERS  # noqa: F401
from effectbench.log.reader import *
from effectbench.log.reader import _CHUNK  # noqa: F401
