"""The DevTools HTTP discovery documents of one episode's endpoint.

A client handed an ``http://`` URL instead of a ``ws://`` one (Playwright's
``connect_over_cdp("http://...")``, tools that read ``/json/list``) first asks for
``<url>/json/version`` and ``<url>/json/list``. ``cdp_proxy`` serves them under the
episode's own token path, from these pure builders: the version document names the
episode's browser endpoint, the list names only the episode's pages, each with a
page-level endpoint under the same token.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

__all__ = ["ROUTES", "UNSCOPED", "page_list", "version"]

ROUTES: Final = (
    ("/json/version", "_json_version"),
    ("/json/version/", "_json_version"),
    ("/json/list", "_json_list"),
    ("/json/list/", "_json_list"),
    ("/json", "_json_list"),
    ("/json/", "_json_list"),
)
"""Each discovery path under an episode's endpoint, and the hub method that answers it
(the trailing-slash forms are what Playwright asks for)."""

UNSCOPED: Final = (
    "this DevTools server has one endpoint per episode and names none at /json: "
    "use the episode's browser.http_url (or browser.cdp_url) from its episode message, "
    "e.g. http://127.0.0.1:PORT/devtools/browser/TOKEN/json/version; a client that "
    "drops the URL's path (Puppeteer's browserURL) must be given browser.cdp_url "
    "as its browserWSEndpoint\n"
)
"""The answer at the root's ``/json/*``: a 404 that says what to connect to instead."""


def version(browser: dict[str, Any], endpoint: str) -> dict[str, str]:
    """``/json/version``: the browser's ``Browser.getVersion`` under Chromium's keys, and
    the episode's endpoint as ``webSocketDebuggerUrl``."""
    return {
        "Browser": str(browser.get("product", "")),
        "Protocol-Version": str(browser.get("protocolVersion", "")),
        "User-Agent": str(browser.get("userAgent", "")),
        "V8-Version": str(browser.get("jsVersion", "")),
        "WebKit-Version": str(browser.get("revision", "")),
        "webSocketDebuggerUrl": endpoint,
    }


def page_list(pages: Iterable[dict[str, Any]], page_base: str) -> list[dict[str, str]]:
    """``/json/list``: one entry per page (``Target.getTargets`` infos, already the
    episode's own), each with its page endpoint ``<page_base><targetId>``."""
    return [
        {
            "description": "",
            "devtoolsFrontendUrl": "",
            "id": str(info["targetId"]),
            "title": str(info.get("title", "")),
            "type": "page",
            "url": str(info.get("url", "")),
            "webSocketDebuggerUrl": page_base + str(info["targetId"]),
        }
        for info in pages
    ]
