"""Old import path, kept so existing imports work: the code lives in `effectbench.outputs`."""

from effectbench.outputs.artifacts import *
from effectbench.outputs.logpass import LogPass  # noqa: F401
from effectbench.outputs.logpass import RunFacts as _RunFacts  # noqa: F401
from effectbench.outputs.logpass import Spill as _Spill  # noqa: F401
from effectbench.outputs.rows import ROW_OPTS as _ROW_OPTS  # noqa: F401
