"""What every executor shares: the protocol, its error type and the Dask install hint
(a module of its own, so executors import it without importing the package)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from effectbench.core.errors import EffectBenchError

if TYPE_CHECKING:
    from effectbench.run.plan import EpisodeSpec
    from effectbench.run.scheduler import Scheduler

INSTALL_HINT = "pip install 'effectbench[dask]' (it brings Dask's distributed scheduler)"


class ExecutorError(EffectBenchError):
    """An executor that cannot be used as given; the message says what to do, in one line."""


class Executor(Protocol):
    async def run_all(self, scheduler: Scheduler, pending: Iterable[EpisodeSpec]) -> None:
        """Run every pending episode, recording each through the scheduler's seam."""
        ...
