"""The run's watch over the services it owns: one per run, held by the scheduler.

Whatever notices that a harness-owned service died tells ``Health``: the Dask executor
finding no live worker calls ``lost``; a provider's service (``services()``) is
``watch``ed, restarted once and said in one line at once. Each loss is kept for the run's
outcome (the CLI ends with ``ExitCode.SERVICE_LOST``), and deaths are counted: an
episode notes ``deaths`` when it starts, and one that ends after a death was in flight
on a dead service, so it is abandoned (unscored, run again by ``--resume``) instead of
being scored or blamed. A loss the run cannot go on from (``fatal``) also stops the run,
as Ctrl-C would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio
import attrs
import structlog

from effectbench.core.capabilities import ProviderCapabilities
from effectbench.core.provider import BenchmarkProvider
from effectbench.core.services import Service, ServiceLoss

__all__ = ["Health", "services_of"]

log = structlog.get_logger("effectbench.run.health")


@attrs.define
class Health:
    _losses: list[ServiceLoss] = attrs.Factory(list)
    _stop: Callable[[], None] | None = None
    fatal: bool = False
    """A loss stopped the run: what was not done is for ``--resume``."""
    _back: anyio.Event | None = None
    """Set when the service being restarted is back; None while none is."""

    async def ready(self) -> None:
        """Wait while a service is being restarted (an episode starts on the new one)."""
        while self._back is not None:
            await self._back.wait()

    async def watch(self, service: Service) -> None:
        """Watch one service for the run (a task the scheduler cancels at its end): at
        its first death it is restarted once, with new episodes held until it is back;
        a second death, or a restart that fails, stops the run."""
        restarts = 0
        while not self.fatal:
            how = await service.died()
            index = len(self._losses)
            self._losses.append(ServiceLoss(service.name, how))  # in-flight episodes: abandoned
            if restarts:
                self._end()
                return
            log.warning(f"{service.name} died ({how}); restarting it")
            back = self._back = anyio.Event()
            try:
                await service.restart()
            except Exception as exc:  # noqa: BLE001 - the service's own failure: reported as the loss
                error = " ".join(str(exc).split()) or type(exc).__name__
                failed = f"{how}; restart failed: {error}"
                self._losses[index] = attrs.evolve(self._losses[index], how=failed)
                self._end()
                return
            finally:
                self._back = None
                back.set()
            self._losses[index] = attrs.evolve(self._losses[index], restarted=True)
            restarts += 1

    def _end(self) -> None:
        """Stop the run (once): a loss it cannot go on from."""
        if not self.fatal:
            self.fatal = True
            if self._stop is not None:
                self._stop()

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

    def lost(self, loss: ServiceLoss) -> None:
        """Record a death the run cannot go on from, and stop the run; its end reports
        every loss (the CLI, in one line each)."""
        self._losses.append(loss)
        self._end()

    def abandoned(self, since: int, n: int = 1) -> None:
        """``n`` episodes that started when ``since`` services had died were abandoned:
        counted against the first death after their start."""
        if since < len(self._losses):
            loss = self._losses[since]
            self._losses[since] = attrs.evolve(loss, abandoned=loss.abandoned + n)


def services_of(provider: BenchmarkProvider) -> Sequence[Service]:
    """The services a started provider lets the harness watch (its optional
    ``services()``); a provider without the hook has none."""
    hook = ProviderCapabilities.of(provider).services
    return list(hook()) if hook is not None else []
