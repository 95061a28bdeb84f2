"""A page screenshot Chromium refuses under load ("Unable to capture screenshot") is
taken again instead of failing the episode (seen in a loaded full run: two computer-use
episodes failed on it); any other error, and a page that keeps refusing, still raise.

The page here stands in for Playwright's (a third party's) only to refuse on cue: how
often real Chromium refuses depends on the machine's load, which a test cannot set."""

from __future__ import annotations

from typing import Any, cast

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from effectbench.arms.capture import CAPTURE_ATTEMPTS, page_png

pytestmark = pytest.mark.anyio

REFUSED = "Page.screenshot: Protocol error (Page.captureScreenshot): Unable to capture screenshot"


class RefusingPage:
    """Refuses the first ``refusals`` captures with ``error``, then gives a PNG."""

    def __init__(self, refusals: int, error: str = REFUSED) -> None:
        self.refusals, self.error = refusals, error
        self.captures = self.frames = 0

    async def screenshot(self, **_: Any) -> bytes:
        self.captures += 1
        if self.captures <= self.refusals:
            raise PlaywrightError(self.error)
        return b"\x89PNG shot"

    async def evaluate(self, _: str) -> int:
        self.frames += 1
        return 0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_refused_capture_is_taken_again_after_the_next_frame() -> None:
    page = RefusingPage(CAPTURE_ATTEMPTS - 1)
    assert await page_png(cast(Page, page)) == b"\x89PNG shot"
    assert (page.captures, page.frames) == (CAPTURE_ATTEMPTS, CAPTURE_ATTEMPTS - 1)


async def test_a_page_that_keeps_refusing_raises_after_the_last_attempt() -> None:
    page = RefusingPage(CAPTURE_ATTEMPTS)
    with pytest.raises(PlaywrightError, match="Unable to capture screenshot"):
        await page_png(cast(Page, page))
    assert page.captures == CAPTURE_ATTEMPTS


async def test_any_other_error_is_raised_at_once() -> None:
    page = RefusingPage(1, "Target page, context or browser has been closed")
    with pytest.raises(PlaywrightError, match="has been closed"):
        await page_png(cast(Page, page))
    assert (page.captures, page.frames) == (1, 0)
