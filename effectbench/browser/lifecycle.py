"""A run's browsers, started and stopped as one: the page pool of browser arms and the
CDP hub of protocol agents.

The scheduler enters :func:`run_browsers` once around its episodes; each episode opens
what its arm needs through the :class:`RunBrowsers` it yields. Either part starts only
when an arm asks for it, and both are stopped (hub first, then pool) when the block ends,
a failure to stop logged, never raised over the run's own result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs
import structlog

from effectbench.core.errors import ConfigurationError, one_line
from effectbench.core.provider import PageCamera

if TYPE_CHECKING:
    from effectbench.browser.cdp_proxy import CdpEpisode, CdpHub
    from effectbench.browser.pool import BrowserPool, EpisodeBrowser

log = structlog.get_logger("effectbench.browser.lifecycle")

__all__ = ["BrowserStartError", "RunBrowsers", "run_browsers"]


class BrowserStartError(ConfigurationError):
    """A run's browser failed to start; the message names the arms that needed it."""

    def __init__(self, arms: Collection[str], cause: Exception) -> None:
        super().__init__(f"the browser for arm {', '.join(sorted(arms))} failed to start: {cause}")


class _Startable(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


_S = TypeVar("_S", bound=_Startable)


@attrs.frozen
class RunBrowsers:
    """What a run's episodes open their browsers from; a part no arm asked for is None."""

    pool: BrowserPool | None = None
    hub: CdpHub | None = None

    async def open_page(self) -> EpisodeBrowser:
        """A fresh context and page for one episode of a browser arm."""
        assert self.pool is not None
        return await self.pool.open()

    async def open_cdp(self, channels: Mapping[str, str]) -> CdpEpisode:
        """A fresh context and its CDP endpoint for a protocol agent's episode, limited to
        the product's origins (those of its channels' URLs)."""
        from effectbench.browser.policy import OriginPolicy

        assert self.hub is not None
        return await self.hub.open(OriginPolicy.of_channels(channels))

    def camera(self, episode: CdpEpisode) -> PageCamera:
        """The harness's own screenshots of that episode's page (``cdp_camera``)."""
        assert self.hub is not None
        return self.hub.camera(episode)

    async def close_cdp(self, episode: CdpEpisode) -> None:
        if self.hub is not None:
            await self.hub.close(episode)


@asynccontextmanager
async def run_browsers(
    *,
    pages_for: Collection[str],
    cdp_for: Collection[str],
    browsers: int | None,
    concurrency: int,
    tmp_dir: Path | None,
) -> AsyncIterator[RunBrowsers]:
    """Start the pool when ``pages_for`` (arms that drive a page) is not empty and the hub
    when ``cdp_for`` (protocol agents with a CDP endpoint) is not, for as long as the block
    runs. ``browsers`` Chromium processes in the pool (None: as many as ``concurrency``
    needs); raises BrowserStartError, nothing left running, when a part cannot start."""
    hub: CdpHub | None = None
    pool: BrowserPool | None = None
    try:
        if cdp_for:
            from effectbench.browser.cdp_proxy import CdpHub

            hub = await _started(CdpHub(), cdp_for)
        if pages_for:
            from effectbench.browser.pool import BrowserPool, default_browsers

            count = browsers or default_browsers(concurrency)
            pool = await _started(BrowserPool(browsers=count, tmp_dir=tmp_dir), pages_for)
        yield RunBrowsers(pool, hub)
    finally:
        await _stopped(hub)
        await _stopped(pool)


async def _started(part: _S, arms: Collection[str]) -> _S:
    try:
        await part.start()
    except Exception as exc:
        raise BrowserStartError(arms, exc) from exc
    return part


async def _stopped(part: _Startable | None) -> None:
    if part is None:
        return
    try:
        await part.stop()
    except Exception as exc:  # noqa: BLE001 - must not hide the run's own result
        log.error("browser.stop_failed", error=one_line(exc))
