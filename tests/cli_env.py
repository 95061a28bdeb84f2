"""The environment a CLI subprocess of the tests runs in, when it must import a test
module: `--provider test_x:factory`, `--arm dask_arms:BarrierArm`."""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def pythonpath_env(*dirs: Path, **extra: str) -> dict[str, str]:
    """This process's environment with ``dirs`` first on PYTHONPATH (before whatever it
    held), plus ``extra`` variables."""
    path = os.pathsep.join([*map(str, dirs), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **extra}
