"""The harness's browsers: a few headless Chromium processes, one context per episode.

A context is Chromium's unit of isolation (its own cookies, storage and cache), so an
episode never sees another's session, while the browser processes (and their start-up
cost) are shared by the whole run. The harness, not the provider, owns them: a provider
only serves pages, and every arm meets the same browser configuration.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Final

import anyio

from effectbench.browser.launch import launch_chromium, start_playwright

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright

    from effectbench.browser.contain import BrowserSandbox

ACTION_TIMEOUT_S: Final = 15.0
"""Playwright's per-action default is 30 s; a page that stalls longer than this is broken."""
CLOSE_TIMEOUT_S: Final = 10.0
VIEWPORT: Final = {"width": 1024, "height": 720}


class EpisodeBrowser:
    """One episode's browser context and page; ``close`` is idempotent and always bounded."""

    def __init__(self, pool: BrowserPool, slot: int, context: BrowserContext, page: Page) -> None:
        self._pool = pool
        self._slot = slot
        self.context = context
        self.page = page
        self._closed = False

    async def close(self) -> None:
        """Close the context (its pages, cookies and storage) even while being cancelled."""
        if self._closed:
            return
        self._closed = True
        try:
            with anyio.CancelScope(shield=True) as scope:
                scope.deadline = anyio.current_time() + CLOSE_TIMEOUT_S
                await self.context.close()
        finally:
            self._pool._release(self._slot)


class BrowserPool:
    """``browsers`` Chromium processes under one Playwright driver, started once per run,
    each inside ``sandbox`` (default: contained where the host can contain agents)."""

    def __init__(
        self,
        *,
        browsers: int = 1,
        executable: str | None = None,
        sandbox: BrowserSandbox | None = None,
        tmp_dir: Path | None = None,
    ) -> None:
        if browsers < 1:
            raise ValueError(f"a browser pool needs at least one browser, got {browsers}")
        self._size = browsers
        self._executable = executable
        self._sandbox = sandbox
        self._tmp_dir = tmp_dir
        """The driver's temp dir (the browsers' profiles): the run's state root."""
        self._playwright: Playwright | None = None
        self._browsers: list[Browser] = []
        self._load: list[int] = []

    @property
    def browsers(self) -> tuple[Browser, ...]:
        return tuple(self._browsers)

    async def start(self) -> None:
        if self._playwright is not None:
            raise RuntimeError("BrowserPool.start() called twice; call stop() first")
        self._playwright = await start_playwright(self._tmp_dir)
        try:
            for _ in range(self._size):
                browser = await launch_chromium(
                    self._playwright, executable=self._executable, sandbox=self._sandbox
                )
                self._browsers.append(browser)
                self._load.append(0)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop()
            raise

    async def stop(self) -> None:
        """Close every browser and the driver; safe to call twice or after a failed start."""
        playwright, self._playwright = self._playwright, None
        browsers, self._browsers, self._load = self._browsers, [], []
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + CLOSE_TIMEOUT_S * (1 + len(browsers))
            for browser in browsers:
                try:
                    await browser.close()
                except Exception:  # noqa: BLE001, S110 - the driver may already be gone
                    pass
            if playwright is not None:
                await playwright.stop()

    async def open(self) -> EpisodeBrowser:
        """A fresh context and page on the least loaded browser."""
        if not self._browsers:
            raise RuntimeError("BrowserPool.open() before start(): call await pool.start() first")
        slot = min(range(len(self._browsers)), key=self._load.__getitem__)
        self._load[slot] += 1
        try:
            context = await self._browsers[slot].new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
            try:
                context.set_default_timeout(ACTION_TIMEOUT_S * 1000.0)
                context.set_default_navigation_timeout(ACTION_TIMEOUT_S * 1000.0)
                page = await context.new_page()
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await context.close()
                raise
        except BaseException:
            self._release(slot)
            raise
        return EpisodeBrowser(self, slot, context, page)

    def _release(self, slot: int) -> None:
        if slot < len(self._load):
            self._load[slot] = max(0, self._load[slot] - 1)


def default_browsers(concurrency: int) -> int:
    """How many browser processes a run of this concurrency gets: one per 8 concurrent
    contexts, at most 2 (measured in bench/browser.py: more only adds memory)."""
    return max(1, min(2, math.ceil(concurrency / 8)))
