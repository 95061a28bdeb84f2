"""CDP endpoints scoped to one episode's browser context, for protocol agents.

``CdpHub`` owns one pipe-driven Chromium (``effectbench.browser.cdp``) and a WebSocket
server on 127.0.0.1. ``open()`` gives an episode a fresh browser context with one
blank page and an endpoint URL ``ws://127.0.0.1:<port>/devtools/browser/<token>``
(144 random bits); a DevTools client (Playwright's ``connect_over_cdp``, Puppeteer,
raw CDP) connects to it as to a browser. ``close()`` disposes of the context (its
pages, cookies and storage) and drops every connection to it; the token then opens
nothing.

Why a filtering proxy and not the browser's own port: Chromium's debugging port has no
authentication, and an agent on the host's network could connect to it and list every
episode's pages. Here the browser has no port; each agent connection becomes a
browser-level session of its own on the harness's pipe (``Target.attachToBrowserTarget``,
so Chromium keeps per-client state apart), and every message is checked:

- browser-level commands are allow-listed (``Browser.getVersion``, a few ``Target``
  and cookie commands); those naming a target or a context must name the episode's
  own (``createTarget`` and the cookie commands are pinned to it); creating, listing
  or disposing of contexts and every other ``Browser.*`` command are refused. A client
  may open more browser-level sessions (``Target.attachToBrowserTarget``, or
  ``Target.attachToTarget`` of the browser target, as Playwright's
  ``new_browser_cdp_session`` and Puppeteer's ``browser.target().createCDPSession()``
  do): each is a session of its own on the pipe, held to the same rules;
- ``Target.setAutoAttach`` is emulated: the proxy attaches the client to the
  context's own pages (and to pages opened later in it), never to another's; target
  events and ``getTargets`` replies are filtered to the episode's context;
- session messages pass only on sessions attached through this connection, and only
  as ``cdp_rules`` allows: download behaviour is acknowledged and dropped (the context
  was created with downloads denied), host-file commands are refused, and a URL an
  agent names must be one of the episode's product origins (``policy``).

For clients handed an ``http://`` URL (the same host, port and path), the endpoint
also answers ``<url>/json/version`` (whose ``webSocketDebuggerUrl`` is the episode's
browser endpoint) and ``<url>/json/list`` (the episode's own pages, each with a
page-level WebSocket, ``/devtools/page/<token>/<target>``, that speaks to that page
without session ids). ``/json/*`` at the root names no episode and is refused.

This module is the hub: the browser, the endpoints and the routing of the pipe's
messages. One agent connection and its filtering is ``effectbench.browser.cdp_client``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from typing import TYPE_CHECKING, Final

import anyio
import orjson
import structlog
from aiohttp import WSMsgType, web

from effectbench.browser import cdp_discovery
from effectbench.browser.cdp import CdpError, CdpPipe, Message
from effectbench.browser.cdp_client import BROWSER_UI, PROXY_IDS, CdpClient, CdpEpisode
from effectbench.browser.contain import BrowserSandbox
from effectbench.browser.gate import BROWSER_FLAGS, Gate
from effectbench.browser.policy import OriginPolicy
from effectbench.core.provider import PageViewport

if TYPE_CHECKING:
    from effectbench.browser.cdp_camera import CdpCamera

log = structlog.get_logger("effectbench.browser")

PATH: Final = "/devtools/browser/"
PAGE_PATH: Final = "/devtools/page/"
CLOSE_TIMEOUT_S: Final = 10.0
VIEWPORT: Final = (1024, 720)
"""Every episode page's size in CSS pixels (the ``episode`` message's ``viewport``)."""
DEVICE_SCALE_FACTOR: Final = 1.0
"""Headless Chromium's device pixels per CSS pixel (no emulation is set)."""


class CdpHub:
    """The run's browser for protocol agents and the endpoints into it."""

    def __init__(
        self, *, executable: str | None = None, sandbox: BrowserSandbox | None = None
    ) -> None:
        self.pipe = CdpPipe(self._on_message, sandbox=sandbox)
        self._executable = executable
        self.owners: dict[str, CdpClient] = {}
        self._contexts: dict[str, str] = {}  # target id -> its browser context id
        self._pages: set[str] = set()
        self._episodes: dict[str, CdpEpisode] = {}  # by token
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._version: Message = {}

    @property
    def open_episodes(self) -> int:
        return len(self._episodes)

    async def start(self) -> None:
        await self.pipe.start(executable=self._executable, args=BROWSER_FLAGS)
        try:
            await self.pipe.call("Target.setDiscoverTargets", {"discover": True})
            self._version = await self.pipe.call("Browser.getVersion")
            app = web.Application()
            app.router.add_get(PATH + "{token}", self._serve)
            app.router.add_get(PAGE_PATH + "{token}/{target}", self._serve_page)
            for tail, handler in cdp_discovery.ROUTES:
                app.router.add_get(PATH + "{token}" + tail, getattr(self, handler))
                app.router.add_get(tail, self._json_unscoped)
            self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await self._runner.setup()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.bind(("127.0.0.1", 0))
            self._port = sock.getsockname()[1]
            await web.SockSite(self._runner, sock).start()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop()
            raise

    async def stop(self) -> None:
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + CLOSE_TIMEOUT_S
            for episode in list(self._episodes.values()):
                await self.close(episode)
            if self._runner is not None:
                runner, self._runner = self._runner, None
                await runner.cleanup()
            await self.pipe.stop()

    # ------------------------------------------------------------ episodes

    async def open(self, policy: OriginPolicy) -> CdpEpisode:
        """A fresh context with one blank page, and the endpoint that reaches only it;
        ``policy``: the product origins its documents and requests may go to (the
        episode's channels, ``OriginPolicy.of_channels``), enforced by the context's own
        network gate (``gate.Gate``). Downloads are denied in it for good."""
        gate = Gate(policy)
        proxy = await gate.start()
        context: str | None = None
        try:
            context = (
                await self.pipe.call(
                    "Target.createBrowserContext",
                    {
                        "disposeOnDetach": False,
                        "proxyServer": proxy,
                        "proxyBypassList": "<-loopback>",
                    },
                )
            )["browserContextId"]
            await self.pipe.call(
                "Browser.setDownloadBehavior", {"behavior": "deny", "browserContextId": context}
            )
            width, height = VIEWPORT
            target = (
                await self.pipe.call(
                    "Target.createTarget",
                    {
                        "url": "about:blank",
                        "browserContextId": context,
                        "width": width,
                        "height": height,
                    },
                )
            )["targetId"]
        except BaseException:
            with anyio.CancelScope(shield=True):
                if context is not None:
                    with contextlib.suppress(CdpError):
                        await self.pipe.call(
                            "Target.disposeBrowserContext", {"browserContextId": context}
                        )
                await gate.stop()
            raise
        self.remember(target, context)
        token = secrets.token_urlsafe(18)
        url = f"ws://127.0.0.1:{self._port}{PATH}{token}"
        episode = CdpEpisode(
            url=url, context_id=context, target_id=target, token=token, policy=policy, gate=gate
        )
        self._episodes[token] = episode
        return episode

    def camera(self, episode: CdpEpisode) -> CdpCamera:
        """The harness's own capture of ``episode``'s page (``cdp_camera``), at the size
        every episode page is created with."""
        from effectbench.browser.cdp_camera import CdpCamera

        width, height = VIEWPORT
        return CdpCamera(self, episode, PageViewport(width, height, DEVICE_SCALE_FACTOR))

    async def close(self, episode: CdpEpisode) -> None:
        """Drop the episode's connections and dispose of its context; idempotent, bounded,
        and done even while the caller is being cancelled."""
        if episode.closed:
            return
        episode.closed = True
        self._episodes.pop(episode.token, None)
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + CLOSE_TIMEOUT_S
            for client in list(episode.clients):
                await self._drop(client)
            try:
                await self.pipe.call(
                    "Target.disposeBrowserContext", {"browserContextId": episode.context_id}
                )
            finally:
                await episode.gate.stop()
                for target, context in list(self._contexts.items()):
                    if context == episode.context_id:
                        del self._contexts[target]
                        self._pages.discard(target)

    # ------------------------------------------------------------ routing

    def post(self, msg: Message) -> None:
        self.pipe.post(msg)

    def remember(self, target: str, context: str, *, page: bool = True) -> None:
        self._contexts[target] = context
        if page:
            self._pages.add(target)

    def context_of(self, target: object) -> str | None:
        return self._contexts.get(target) if isinstance(target, str) else None

    def targets_of(self, context: str) -> list[str]:
        """The context's pages (what a browser-level auto-attach attaches to)."""
        return [t for t, c in self._contexts.items() if c == context and t in self._pages]

    def _on_message(self, msg: Message) -> None:
        session = msg.get("sessionId")
        if session is None:
            self._root_event(msg)
            return
        client = self.owners.get(session)
        if client is not None:
            client.from_browser(msg)

    def _root_event(self, msg: Message) -> None:
        method = msg.get("method")
        params = msg.get("params") or {}
        info = params.get("targetInfo") or {}
        if method == "Target.targetCreated" and info.get("type") not in BROWSER_UI:
            context = info.get("browserContextId")
            if isinstance(context, str):
                page = info.get("type") == "page"
                self.remember(info["targetId"], context, page=page)
                if page:
                    self._auto_attach(context, info["targetId"])
        elif method == "Target.targetDestroyed":
            gone = str(params.get("targetId"))
            self._contexts.pop(gone, None)
            self._pages.discard(gone)

    def _auto_attach(self, context: str, target: str) -> None:
        for episode in self._episodes.values():
            if episode.context_id == context:
                for client in episode.clients:
                    for via in list(client.auto):
                        asyncio.ensure_future(client.attach(target, via))

    # ------------------------------------------------------------ the endpoint

    def _episode(self, request: web.Request) -> CdpEpisode:
        episode = self._episodes.get(request.match_info["token"])
        if episode is None or episode.closed:
            raise web.HTTPNotFound(text="no such episode endpoint (closed, or never opened)\n")
        return episode

    async def _json_version(self, request: web.Request) -> web.Response:
        episode = self._episode(request)
        return web.json_response(cdp_discovery.version(self._version, episode.url))

    async def _json_list(self, request: web.Request) -> web.Response:
        episode = self._episode(request)
        infos = (await self.pipe.call("Target.getTargets")).get("targetInfos") or []
        pages = [
            i for i in infos
            if i.get("browserContextId") == episode.context_id and i.get("type") == "page"
        ]  # fmt: skip
        base = f"ws://127.0.0.1:{self._port}{PAGE_PATH}{episode.token}/"
        return web.json_response(cdp_discovery.page_list(pages, base))

    async def _json_unscoped(self, request: web.Request) -> web.Response:
        raise web.HTTPNotFound(text=cdp_discovery.UNSCOPED)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        return await self._connect(request, self._episode(request), None)

    async def _serve_page(self, request: web.Request) -> web.StreamResponse:
        episode = self._episode(request)
        target = request.match_info["target"]
        if target not in self.targets_of(episode.context_id):
            raise web.HTTPNotFound(text="no such page in this episode\n")
        return await self._connect(request, episode, target)

    async def _connect(
        self, request: web.Request, episode: CdpEpisode, page: str | None
    ) -> web.StreamResponse:
        """One client connection: a browser session of its own on the pipe, and for a
        page endpoint (``page``, a target of the episode) a session on that page."""
        ws = web.WebSocketResponse(max_msg_size=64 << 20, autoping=True)
        await ws.prepare(request)
        client = CdpClient(self, episode, ws)
        episode.clients.append(client)  # from now on, closing the episode drops it
        try:
            root = (await self.pipe.call("Target.attachToBrowserTarget"))["sessionId"]
        except CdpError:
            root = None
        if root is not None:
            client.root = root
            self.owners[root] = client
        if root is not None and page is not None:
            client.page = await self._attach_page(client, page)
        if root is None or episode.closed or (page is not None and client.page is None):
            await self._drop(client)
            return ws
        pump = asyncio.ensure_future(client.pump_out())
        try:
            async for frame in ws:
                if frame.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                    break
                try:
                    msg = orjson.loads(frame.data)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(msg, dict):
                    await client.handle(msg)
        finally:
            await self._drop(client)
            client.stop()
            with contextlib.suppress(Exception):
                await pump
        return ws

    async def _attach_page(self, client: CdpClient, target: str) -> str | None:
        """A page endpoint's own session on its page (None when the page is gone)."""
        client.page = ""  # its root's events are plumbing from here on, not the client's
        try:
            reply = await self.pipe.call(
                "Target.attachToTarget",
                {"targetId": target, "flatten": True},
                session=client.root,
                ident=PROXY_IDS,
            )
        except CdpError:
            return None
        session = reply.get("sessionId")
        if not isinstance(session, str):
            return None
        client.sessions.add(session)
        self.owners[session] = client
        return session

    async def _drop(self, client: CdpClient) -> None:
        """Forget a connection's sessions, detach its browser session, close its socket."""
        if client in client.episode.clients:
            client.episode.clients.remove(client)
        for session in (*client.sessions, *client.browsers, client.root):
            self.owners.pop(session, None)
        for browser in (*client.browsers, client.root):
            if browser:
                await self._detach(browser)
        client.stop()
        await client.ws.close()

    async def _detach(self, session: str) -> None:
        if self.pipe.alive:
            with contextlib.suppress(CdpError):
                await self.pipe.call(
                    "Target.detachFromTarget", {"sessionId": session}, timeout_s=3.0
                )


__all__ = ["PAGE_PATH", "PATH", "PROXY_IDS", "CdpEpisode", "CdpHub"]
