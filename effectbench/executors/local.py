"""The local executor: every episode in this process, as the scheduler has always run them.

It is the run's own path (``EpisodeSink.run_here``), so its artifacts are byte-for-byte
those of a run without an executor."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from effectbench.executors.base import EpisodeSink
from effectbench.run.plan import EpisodeSpec


@attrs.frozen
class LocalExecutor:
    async def run_all(self, sink: EpisodeSink, pending: Iterable[EpisodeSpec]) -> None:
        await sink.run_here(pending)
