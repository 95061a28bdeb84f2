"""A browser page's screenshot, taken again when Chromium could not take it.

Under load headless Chromium now and then answers ``Page.captureScreenshot`` with
"Unable to capture screenshot" (its compositor had no frame to give, e.g. while a page
commits). That says nothing about the product or the agent, so an episode must not fail
on it: the capture is retried after the page's next animation frame, a few times, and
only a page that keeps refusing raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = ["CAPTURE_ATTEMPTS", "page_png"]

CAPTURE_ATTEMPTS: Final = 4
_REFUSED: Final = "Unable to capture screenshot"
_NEXT_FRAME_JS: Final = "() => new Promise(r => requestAnimationFrame(() => r(0)))"


async def page_png(page: Page) -> bytes:
    """The page's viewport as PNG bytes; a refused capture is retried (see above)."""
    from playwright.async_api import Error as PlaywrightError

    for attempt in range(1, CAPTURE_ATTEMPTS + 1):
        try:
            return await page.screenshot(type="png")
        except PlaywrightError as exc:
            if _REFUSED not in str(exc) or attempt == CAPTURE_ATTEMPTS:
                raise
        try:
            await page.evaluate(_NEXT_FRAME_JS)
        except PlaywrightError:
            pass  # the page is navigating: the next capture waits on Playwright's side
    raise AssertionError("unreachable")  # pragma: no cover
