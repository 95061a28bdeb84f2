"""The browser substrate: headless Chromium driven through Playwright, owned by the harness.

Public pieces:

- ``start_playwright()``, ``launch_chromium(playwright)`` and ``chromium()``: Playwright's
  driver and one configured headless Chromium
  (the distribution's, found by ``find_chromium``), started so it dies with the harness.
  Reuse these wherever the project needs a browser (reports, tools, tests).
- ``BrowserPool``: the run's browsers; ``open()`` gives one episode a fresh context and page.
- ``uses_browser(arm)``: whether an arm asks for the ``browser`` channel;
  ``uses_browser_cdp(arm)``: whether a protocol agent asks for a CDP endpoint
  (``effectbench.browser.cdp_proxy.CdpHub``).

Importing this package does not import Playwright; only starting a browser does.
"""

from __future__ import annotations

from effectbench.browser.launch import (
    CANDIDATES,
    CHROMIUM_ENV,
    FLAGS,
    INSTALL_HINT,
    BrowserUnavailable,
    check_browser,
    chromium,
    find_chromium,
    launch_chromium,
    require_playwright,
    start_playwright,
)
from effectbench.browser.pool import BrowserPool, EpisodeBrowser, default_browsers
from effectbench.core.capabilities import ArmCapabilities


def uses_browser(arm: object) -> bool:
    """An arm asks for a browser page by setting ``uses_browser = True`` (see
    docs/writing-an-arm.md); the scheduler then fills ``EnvHandle.browser``."""
    return ArmCapabilities.of(arm).uses_browser


def uses_browser_cdp(arm: object) -> bool:
    """A protocol agent asks for a CDP endpoint by ``uses_browser_cdp = True``
    (``ExecArm(..., browser=True)``); the scheduler then fills ``EnvHandle.browser_cdp``."""
    return ArmCapabilities.of(arm).uses_browser_cdp


__all__ = [
    "CANDIDATES",
    "CHROMIUM_ENV",
    "FLAGS",
    "INSTALL_HINT",
    "BrowserPool",
    "BrowserUnavailable",
    "EpisodeBrowser",
    "check_browser",
    "chromium",
    "default_browsers",
    "find_chromium",
    "launch_chromium",
    "require_playwright",
    "start_playwright",
    "uses_browser",
    "uses_browser_cdp",
]
