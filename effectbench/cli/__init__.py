"""Old import path, kept so existing imports work: the code lives in `effectbench.cli.commands`."""

from effectbench.cli.commands import *
from effectbench.cli.commands import (
    _report,  # noqa: F401
    main,  # noqa: F401
)
