"""The episode's CDP endpoint for clients that discover over HTTP and open extra sessions.

A real hub (pipe-driven Chromium, the filtering proxy on 127.0.0.1) with two episodes:
``/json/version`` and ``/json/list`` under episode A's http:// URL name only A's
endpoint and pages; Playwright connects from that URL and opens ``new_cdp_session`` and
``new_browser_cdp_session``; a raw client opens Puppeteer's browser-level session (an
attach to the browser target) and a page-level socket from ``/json/list``. On each,
what belongs to episode B or to the browser as a whole stays refused. On main the
discovery paths were 404 and every extra session was refused.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.from_thread
import pytest

from effectbench.agents.reference.cdp_screen_only import Cdp
from effectbench.browser.cdp_discovery import UNSCOPED
from effectbench.browser.cdp_proxy import CdpEpisode, CdpHub
from effectbench.browser.policy import OriginPolicy

pytestmark = pytest.mark.timeout(300)
NOWHERE = OriginPolicy(frozenset())


def _http(url: str) -> str:
    return url.replace("ws://", "http://", 1)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:  # 127.0.0.1 only
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _refused(cdp: Cdp, method: str, params: dict[str, Any] | None = None, **kw: Any) -> str:
    with pytest.raises(RuntimeError) as info:
        cdp.call(method, params, **kw)
    return str(info.value)


class Hub:
    def __init__(self, portal: Any, hub: CdpHub) -> None:
        self.portal = portal
        self.hub = hub

    def open(self) -> CdpEpisode:
        episode: CdpEpisode = self.portal.call(self.hub.open, NOWHERE)
        return episode

    def close(self, episode: CdpEpisode) -> None:
        self.portal.call(self.hub.close, episode)


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    with anyio.from_thread.start_blocking_portal() as portal:
        real = CdpHub()
        portal.call(real.start)
        try:
            yield Hub(portal, real)
        finally:
            portal.call(real.stop)


def test_json_version_and_list_name_only_the_episode(hub: Hub) -> None:
    a, b = hub.open(), hub.open()
    try:
        base = _http(a.url)
        for path in ("/json/version", "/json/version/"):
            status, body = _get(base + path)
            assert status == 200, body
            doc = json.loads(body)
            assert doc["webSocketDebuggerUrl"] == a.url
            assert "Chrome" in doc["Browser"] and doc["Protocol-Version"]
        for path in ("/json/list", "/json/list/", "/json"):
            status, body = _get(base + path)
            assert status == 200, body
            pages = json.loads(body)
            assert [p["id"] for p in pages] == [a.target_id], pages
            assert pages[0]["webSocketDebuggerUrl"].endswith(f"/{a.token}/{a.target_id}")
            assert b.target_id not in body.decode() and b.token not in body.decode()
        # the root names no episode: refused with what to connect to instead
        root = base.split("/devtools/")[0]
        for path in ("/json/version", "/json/list", "/json"):
            status, body = _get(root + path)
            assert (status, body.decode()) == (404, UNSCOPED), path
        # another episode's page under A's token, a made-up token: nothing
        page_base = pages[0]["webSocketDebuggerUrl"].rsplit("/", 1)[0]
        for url in (f"{page_base}/{b.target_id}", base.rsplit("/", 1)[0] + "/nope/json/list"):
            status, _ = _get(_http(url))
            assert status == 404, url
    finally:
        hub.close(a)
        hub.close(b)
    status, _ = _get(base + "/json/version")
    assert status == 404  # closed: the token opens nothing, over http either


async def _playwright_over_http(a: CdpEpisode, b: CdpEpisode) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(_http(a.url))
        (page,) = [p for c in browser.contexts for p in c.pages]
        await page.set_content("<title>episode A</title>")
        session = await page.context.new_cdp_session(page)
        done = await session.send("Runtime.evaluate", {"expression": "document.title"})
        assert done["result"]["value"] == "episode A"
        whole = await browser.new_browser_cdp_session()
        infos = (await whole.send("Target.getTargets"))["targetInfos"]
        pages = {i["targetId"] for i in infos if i["type"] == "page"}
        assert a.target_id in pages and b.target_id not in pages
        contexts = (await whole.send("Target.getBrowserContexts"))["browserContextIds"]
        assert contexts == [a.context_id]
        for method, params in (
            ("Target.createBrowserContext", {}),
            ("Target.attachToTarget", {"targetId": b.target_id, "flatten": True}),
            ("Target.closeTarget", {"targetId": b.target_id}),
            ("Browser.close", {}),
        ):
            with pytest.raises(Exception, match="not allowed|not a target of this episode"):
                await whole.send(method, params)
        await browser.close()


def test_playwright_connects_over_http_and_opens_scoped_cdp_sessions(hub: Hub) -> None:
    a, b = hub.open(), hub.open()
    try:
        hub.portal.call(_playwright_over_http, a, b)
    finally:
        hub.close(a)
        hub.close(b)


def test_puppeteers_browser_session_and_a_page_socket_stay_in_the_episode(hub: Hub) -> None:
    a, b = hub.open(), hub.open()
    try:
        cdp = Cdp(a.url)
        # Puppeteer: discover every target, find the browser target, attach to it
        cdp.call("Target.setDiscoverTargets", {"discover": True, "filter": [{}]})
        infos = cdp.call("Target.getTargets")["targetInfos"]
        browser = [i["targetId"] for i in infos if i["type"] == "browser"]
        assert a.target_id in {i["targetId"] for i in infos}
        assert b.target_id not in json.dumps(infos) and b.target_id not in json.dumps(cdp.events)
        if not browser:  # not every Chromium lists itself: ask for its own info
            browser = [cdp.call("Target.getTargetInfo")["targetInfo"]["targetId"]]
        extra = cdp.call("Target.attachToTarget", {"targetId": browser[0], "flatten": True})
        session = extra["sessionId"]
        infos = cdp.call("Target.getTargets", session=session)["targetInfos"]
        assert b.target_id not in json.dumps(infos)
        page = cdp.call(
            "Target.attachToTarget", {"targetId": a.target_id, "flatten": True}, session=session
        )["sessionId"]
        assert cdp.value("JSON.stringify(1 + 1)", page) == 2
        assert "not a target of this episode" in _refused(
            cdp, "Target.attachToTarget", {"targetId": b.target_id, "flatten": True},
            session=session,
        )  # fmt: skip
        for method in ("Target.createBrowserContext", "Browser.close", "Browser.getHistograms"):
            assert "not allowed" in _refused(cdp, method, session=session), method
        assert "not this episode's browser context" in _refused(
            cdp, "Target.disposeBrowserContext", {"browserContextId": b.context_id},
            session=session,
        )  # fmt: skip
        assert "not allowed on a page's session" in _refused(
            cdp, "Target.attachToBrowserTarget", session=page
        )
        # a page-level socket, as /json/list hands it out: no session ids, its page only
        _, body = _get(_http(a.url) + "/json/list")
        page_ws = Cdp(json.loads(body)[0]["webSocketDebuggerUrl"])
        assert page_ws.call("Runtime.evaluate", {"expression": "40 + 2"})["result"]["value"] == 42
        assert "not allowed on a page's session" in _refused(page_ws, "Target.createBrowserContext")
        assert "refused" in _refused(page_ws, "Page.navigate", {"url": "file:///etc/passwd"})
        assert "no session" in _refused(page_ws, "Runtime.evaluate", {"expression": "1"},
                                        session=page)  # fmt: skip
        page_ws.ws.close()
        cdp.ws.close()
    finally:
        hub.close(a)
        hub.close(b)
