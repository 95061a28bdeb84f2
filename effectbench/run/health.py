"""The run's watch over the services it owns: one per run, held by the scheduler.

Whatever notices that a harness-owned service died (the Dask executor finding no live
worker, a provider's watcher seeing its database server exit) tells ``Health.lost``.
It says so in one line at once, keeps the loss for the run's outcome (the CLI ends
with ``ExitCode.SERVICE_LOST``), and counts deaths: an episode notes ``deaths`` when it
starts, and one that ends after a death was in flight on a dead service, so it is
abandoned (unscored, run again by ``--resume``) instead of being scored or blamed. A
loss the run cannot go on from (``fatal``) also stops the run, as Ctrl-C would.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import structlog

from effectbench.core.services import ServiceLoss

__all__ = ["Health"]

log = structlog.get_logger("effectbench.run.health")


@attrs.define
class Health:
    _losses: list[ServiceLoss] = attrs.Factory(list)
    _stop: Callable[[], None] | None = None
    fatal: bool = False
    """A loss stopped the run: what was not done is for ``--resume``."""

    @property
    def deaths(self) -> int:
        """How many services died so far in this run."""
        return len(self._losses)

    @property
    def losses(self) -> tuple[ServiceLoss, ...]:
        return tuple(self._losses)

    def on_fatal(self, stop: Callable[[], None] | None) -> None:
        """What stops the run's work when a loss is fatal (the scheduler's cancel)."""
        self._stop = stop

    def lost(self, loss: ServiceLoss, *, fatal: bool) -> None:
        """Record a death; ``fatal`` stops the run. One the run goes on from is said at
        once, in one line; the run's end reports every loss (the CLI, in one line each)."""
        self._losses.append(loss)
        if not fatal:
            log.warning(f"{loss.service} died ({loss.how}); the run goes on")
        if fatal and not self.fatal:
            self.fatal = True
            if self._stop is not None:
                self._stop()

    def abandoned(self, since: int, n: int = 1) -> None:
        """``n`` episodes that started when ``since`` services had died were abandoned:
        counted against the first death after their start."""
        if since < len(self._losses):
            loss = self._losses[since]
            self._losses[since] = attrs.evolve(loss, abandoned=loss.abandoned + n)
