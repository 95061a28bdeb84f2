"""What every executor shares: the protocol, the run as it sees it (``EpisodeSink``), its
error type and the Dask install hint (a module of its own, so executors import it
without importing the package)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from effectbench.core.errors import EffectBenchError

if TYPE_CHECKING:
    from effectbench.run.episode import EpisodeOutcome, Line
    from effectbench.run.health import Health
    from effectbench.run.options import RunOptions
    from effectbench.run.plan import EpisodeSpec, Plan

INSTALL_HINT = "pip install 'effectbench[dask]' (it brings Dask's distributed scheduler)"


class ExecutorError(EffectBenchError):
    """An executor that cannot be used as given; the message says what to do, in one line."""


class EpisodeSink(Protocol):
    """The run as an executor sees it, and all it sees: what to run and where its state
    goes, and where whole episodes are handed back. The scheduler stays the log's one
    writer: an episode that ran elsewhere is written, and counted, only when ``record``
    is given it."""

    @property
    def run_id(self) -> str: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def options(self) -> RunOptions: ...

    @property
    def run_dir(self) -> Path: ...

    @property
    def state_root(self) -> Path | None:
        """The run's state root (effectbench.run.statedir), None outside one."""
        ...

    @property
    def health(self) -> Health:
        """The run's watch over its services: an executor reports a lost cluster here."""
        ...

    @property
    def start_failed(self) -> bool:
        """Whether the run's start failed (``fail_start``): submit nothing more."""
        ...

    def planned(self, spec: EpisodeSpec) -> dict[str, Any]:
        """The data of the spec's episode.planned event, as the run would write it."""
        ...

    def started(self) -> None:
        """One more episode was handed out (the run is interrupted until each ends)."""
        ...

    def all_started(self) -> None:
        """Every pending episode was handed out."""
        ...

    def fail_start(self, message: str) -> None:
        """The provider could not start where episodes run: end the run as a failed
        start does (the first message wins)."""
        ...

    async def run_here(self, pending: Iterable[EpisodeSpec]) -> None:
        """Run the episodes in this process, as a run without an executor does."""
        ...

    async def record(self, entries: Sequence[Line], outcome: EpisodeOutcome | None = None) -> None:
        """Write an episode's lines as they are (their times kept), then count it by its
        outcome; without one (planned, then abandoned) it counts as neither finished
        nor failed, so ``--resume`` runs it again."""
        ...


class Executor(Protocol):
    async def run_all(self, sink: EpisodeSink, pending: Iterable[EpisodeSpec]) -> None:
        """Run every pending episode, handing each back through the sink."""
        ...
