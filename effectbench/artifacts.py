"""Old import path, kept so existing imports work: the code lives in `effectbench.outputs.artifacts`."""

from effectbench.outputs.artifacts import *
from effectbench.outputs.artifacts import (  # noqa: F401
    _ROW_OPTS,
    MANIFEST_FILE,
    METRICS_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    LogPass,
    _RunFacts,
    _Spill,
)
