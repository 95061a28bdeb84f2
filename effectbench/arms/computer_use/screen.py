"""Where computer actions land: a ``Screen`` captures pixels and performs actions.

``PlaywrightScreen`` is the harness's screen over the episode's browser page: the page
is resized to the run's fixed viewport, each action is performed with Playwright's
mouse and keyboard at the given coordinates, and the screen waits for a navigation the
action started (a form's submit) before the next capture, so a screenshot shows the page
the action led to. Other screens (a VNC desktop, a test's recording wrapper) implement
the same two methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

import anyio

from effectbench.arms.capture import page_png
from effectbench.arms.computer_use.actions import (
    Action,
    Click,
    Done,
    DoubleClick,
    Drag,
    Key,
    Move,
    Screenshot,
    Scroll,
    Type,
    Viewport,
    Wait,
)

if TYPE_CHECKING:
    from playwright.async_api import Page, Request

__all__ = ["PlaywrightScreen", "Screen"]

NAVIGATION_TIMEOUT_MS: Final = 15_000
"""How long a screen waits for a page an action started to load before capturing anyway."""
_SETTLE_JS: Final = "() => new Promise(r => setTimeout(() => requestAnimationFrame(() => r(0)), 0))"


@runtime_checkable
class Screen(Protocol):
    """What a computer-use arm sees and acts on."""

    viewport: Viewport

    async def capture(self) -> bytes:
        """The screen now, as PNG bytes of exactly the viewport's size."""
        ...

    async def perform(self, action: Action) -> None:
        """Perform one action (never ``Done``); raises only for a screen that is gone."""
        ...


class PlaywrightScreen:
    """The episode's Playwright page as a screen of a fixed size."""

    def __init__(self, page: Page, viewport: Viewport) -> None:
        self.page = page
        self.viewport = viewport
        self._started = 0
        self._settled = 0
        self._changed = anyio.Event()
        page.on("request", self._on_request)
        page.on("requestfailed", self._on_failed)
        page.on("load", self._on_load)

    def _navigation(self, request: Request) -> bool:
        return request.is_navigation_request() and request.frame == self.page.main_frame

    def _on_request(self, request: Request) -> None:
        if self._navigation(request):
            self._started += 1

    def _on_failed(self, request: Request) -> None:
        if self._navigation(request):
            self._settle()

    def _on_load(self, _: object) -> None:
        self._settle()

    def _settle(self) -> None:
        self._settled = self._started
        self._changed.set()

    async def open(self) -> None:
        """Fix the page's size; call once before the first capture."""
        await self.page.set_viewport_size(
            {"width": self.viewport.width, "height": self.viewport.height}
        )

    async def capture(self) -> bytes:
        return await page_png(self.page)

    async def perform(self, action: Action) -> None:
        from playwright.async_api import Error as PlaywrightError

        mouse, keyboard = self.page.mouse, self.page.keyboard
        match action:
            case Click(x, y, button):
                await mouse.click(x, y, button=button)
            case DoubleClick(x, y):
                await mouse.dblclick(x, y)
            case Move(x, y):
                await mouse.move(x, y)
            case Drag(x, y, to_x, to_y):
                await mouse.move(x, y)
                await mouse.down()
                await mouse.move(to_x, to_y, steps=8)
                await mouse.up()
            case Type(text):
                await keyboard.type(text)
            case Key(combo):
                await keyboard.press(combo)
            case Scroll(x, y, dx, dy):
                await mouse.move(x, y)
                await mouse.wheel(dx, dy)
            case Wait(ms):
                await anyio.sleep(ms / 1000.0)
            case Screenshot() | Done():
                return
        try:
            await self.page.evaluate(_SETTLE_JS)
        except PlaywrightError:
            pass  # the page navigated away while settling: waited for below
        await self._await_navigation()

    async def _await_navigation(self) -> None:
        """Wait (bounded) until every page an action started has loaded or failed."""
        with anyio.move_on_after(NAVIGATION_TIMEOUT_MS / 1000.0):
            while self._settled < self._started:
                self._changed = anyio.Event()
                await self._changed.wait()
