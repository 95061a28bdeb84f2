"""The local executor: every episode in this process, as the scheduler has always run them.

It is the scheduler's own path (``Scheduler._run_all``), so its artifacts are
byte-for-byte those of a run without an executor."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from effectbench.run.plan import EpisodeSpec
from effectbench.run.scheduler import Scheduler


@attrs.frozen
class LocalExecutor:
    async def run_all(self, scheduler: Scheduler, pending: Iterable[EpisodeSpec]) -> None:
        await scheduler._run_all(pending)
