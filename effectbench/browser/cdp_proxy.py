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
  or disposing of contexts, opening another browser session and every other
  ``Browser.*`` command are refused;
- ``Target.setAutoAttach`` is emulated: the proxy attaches the client to the
  context's own pages (and to pages opened later in it), never to another's; target
  events and ``getTargets`` replies are filtered to the episode's context;
- session messages pass only on sessions attached through this connection, and only
  as ``cdp_rules`` allows: download behaviour is acknowledged and dropped (the context
  was created with downloads denied), host-file commands are refused, and a URL an
  agent names must be one of the episode's product origins (``policy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from typing import Final

import anyio
import attrs
import orjson
import structlog
from aiohttp import WSMsgType, web

from effectbench.browser import cdp_rules
from effectbench.browser.cdp import CdpError, CdpPipe, Message
from effectbench.browser.contain import BrowserSandbox
from effectbench.browser.gate import BROWSER_FLAGS, Gate
from effectbench.browser.policy import OriginPolicy

log = structlog.get_logger("effectbench.browser")

PATH: Final = "/devtools/browser/"
PROXY_IDS: Final = 2_000_000_000
"""Command ids at or above this are the proxy's own on an agent's session; an agent's
are refused there."""
CLOSE_TIMEOUT_S: Final = 10.0
VIEWPORT: Final = (1024, 720)
_REFUSED: Final = -32000

_PINNED_CONTEXT: Final = frozenset({
    "Storage.getCookies", "Storage.setCookies", "Storage.clearCookies", "Target.createTarget",
})  # fmt: skip
_OWN_TARGET: Final = frozenset({
    "Target.attachToTarget", "Target.closeTarget", "Target.activateTarget",
})  # fmt: skip
_PASS: Final = frozenset({"Browser.getVersion", "Target.setDiscoverTargets"})
_BROWSER_UI: Final = frozenset({"browser", "browser_ui", "tab"})
_TARGET_EVENTS: Final = frozenset({
    "Target.targetCreated", "Target.targetInfoChanged", "Target.targetDestroyed",
    "Target.targetCrashed",
})  # fmt: skip


@attrs.define(eq=False)
class CdpEpisode:
    """One episode's context, its first page and the endpoint an agent connects to."""

    url: str
    context_id: str
    target_id: str
    token: str
    policy: OriginPolicy
    gate: Gate
    clients: list[_Client] = attrs.field(factory=list)
    closed: bool = False


def _error(ident: object, message: str, session: str | None = None) -> Message:
    reply: Message = {"id": ident, "error": {"code": _REFUSED, "message": message}}
    if session is not None:
        reply["sessionId"] = session
    return reply


class _Client:
    """One agent connection: its browser session on the pipe and what it may reach."""

    def __init__(self, hub: CdpHub, episode: CdpEpisode, ws: web.WebSocketResponse) -> None:
        self.hub = hub
        self.episode = episode
        self.ws = ws
        self.root: str = ""
        self.sessions: set[str] = set()
        self.attached: dict[str, asyncio.Future[None]] = {}  # target -> its attach
        self.auto_attach = False
        self.methods: dict[int, str] = {}  # its browser-level commands awaiting a reply
        self._ids = PROXY_IDS
        self._out: asyncio.Queue[Message | None] = asyncio.Queue()

    # ------------------------------------------------------------ to the agent

    def send(self, msg: Message) -> None:
        self._out.put_nowait(msg)

    async def pump_out(self) -> None:
        while (msg := await self._out.get()) is not None:
            await self.ws.send_bytes(orjson.dumps(msg))

    def stop(self) -> None:
        self._out.put_nowait(None)

    # ------------------------------------------------------------ from the agent

    async def handle(self, msg: Message) -> None:
        ident, method = msg.get("id"), msg.get("method")
        if type(ident) is not int or not isinstance(method, str):
            self.send(_error(ident, "a command needs an integer id and a method"))
            return
        session = msg.get("sessionId")
        params = msg.get("params") or {}
        if not isinstance(params, dict) or (session is not None and not isinstance(session, str)):
            self.send(_error(ident, "params must be an object and sessionId a string", session))
            return
        if ident >= PROXY_IDS:
            self.send(_error(ident, f"command ids must be below {PROXY_IDS}", session))
            return
        context = params.get("browserContextId")
        if context is not None and context != self.episode.context_id:
            self.send(_error(ident, "not this episode's browser context", session))
            return
        if session is not None and session not in self.sessions:
            self.send(_error(ident, f"no session {session} on this endpoint", session))
        elif method in cdp_rules.DOWNLOAD_BEHAVIOUR:
            # acknowledged, never forwarded: the context's "deny" (set at open) stands
            self.send(
                {"id": ident, "result": {}, **({} if session is None else {"sessionId": session})}
            )
        elif session is None:
            await self._browser_command(ident, method, params)
        elif (why := cdp_rules.session_refusal(method, params, self.episode.policy)) is not None:
            self.send(_error(ident, why, session))
        else:
            self.hub.post({**msg, "params": params})

    async def _browser_command(self, ident: int, method: str, params: Message) -> None:
        own = self.episode.context_id
        if method == "Target.setAutoAttach":
            self.auto_attach = bool(params.get("autoAttach"))
            if self.auto_attach:
                for target in self.hub.targets_of(own):
                    await self.attach(target)
            self.send({"id": ident, "result": {}})
            return
        if method == "Target.getBrowserContexts":
            self.send({"id": ident, "result": {"browserContextIds": [own]}})
            return
        if method == "Target.detachFromTarget":
            if params.get("sessionId") not in self.sessions:
                self.send(_error(ident, "no such session on this endpoint"))
                return
        elif method in _OWN_TARGET or method == "Target.getTargetInfo":
            named = params.get("targetId")
            if named is None and method == "Target.getTargetInfo":
                pass  # the browser's own target
            elif self.hub.context_of(named) != own:
                self.send(_error(ident, "not a target of this episode's browser context"))
                return
        elif method in _PINNED_CONTEXT:
            params = {**params, "browserContextId": own}
            refused = cdp_rules.url_refusal(method, params, self.episode.policy)
            if refused is not None:
                self.send(_error(ident, refused))
                return
        elif method not in _PASS and method != "Target.getTargets":
            self.send(_error(ident, f"{method} is not allowed through this endpoint"))
            return
        self.methods[ident] = method
        self.hub.post({"id": ident, "method": method, "params": params, "sessionId": self.root})

    async def attach(self, target: str) -> None:
        """Give the agent a session on one of its own pages (what auto-attach would)."""
        pending = self.attached.get(target)
        if pending is None:
            pending = self.attached[target] = asyncio.ensure_future(self._attach(target))
        await asyncio.shield(pending)

    async def _attach(self, target: str) -> None:
        self._ids += 1
        try:
            await self.hub.pipe.call(
                "Target.attachToTarget",
                {"targetId": target, "flatten": True},
                session=self.root,
                ident=self._ids,
            )
        except CdpError as exc:
            log.debug("cdp.attach_failed", target=target, error=str(exc))

    # ------------------------------------------------------------ from the browser

    def from_browser(self, msg: Message) -> None:
        session = msg.get("sessionId")
        method = msg.get("method")
        if session == self.root:
            msg = {k: v for k, v in msg.items() if k != "sessionId"}
            if "id" in msg:
                self._reply(msg)
                return
            if not self._event_is_own(msg):
                return
        if method == "Target.attachedToTarget":
            child = (msg.get("params") or {}).get("sessionId")
            if isinstance(child, str):
                self.sessions.add(child)
                self.hub.owners[child] = self
        elif method == "Target.detachedFromTarget":
            child = str((msg.get("params") or {}).get("sessionId"))
            self.sessions.discard(child)
            self.hub.owners.pop(child, None)
            target = (msg.get("params") or {}).get("targetId")
            if session == self.root and isinstance(target, str):
                self.attached.pop(target, None)
        self.send(msg)

    def _reply(self, msg: Message) -> None:
        method = self.methods.pop(msg["id"], None)
        if method == "Target.getTargets" and "result" in msg:
            infos = msg["result"].get("targetInfos") or []
            own = [i for i in infos if self._is_own(i)]
            msg = {**msg, "result": {**msg["result"], "targetInfos": own}}
        elif method == "Target.createTarget" and "result" in msg:
            target = msg["result"].get("targetId")
            # pinned to this context; known before the agent can name it in its next command
            self.hub.remember(target, self.episode.context_id)
            if self.auto_attach:
                asyncio.ensure_future(self._attach_then(target, msg))
                return
        self.send(msg)

    async def _attach_then(self, target: str, reply: Message) -> None:
        """A page the agent created: its attach event goes first, as Chromium's would."""
        await self.attach(target)
        self.send(reply)

    def _event_is_own(self, msg: Message) -> bool:
        method = msg.get("method")
        params = msg.get("params") or {}
        if method in ("Target.attachedToTarget", "Target.detachedFromTarget"):
            return True  # only ever for targets this client attached
        if method not in _TARGET_EVENTS:
            return False  # no other browser-wide event is the episode's to see
        info = params.get("targetInfo")
        if isinstance(info, dict):
            return self._is_own(info)
        return self.hub.context_of(params.get("targetId")) == self.episode.context_id

    def _is_own(self, info: Message) -> bool:
        """A target of this episode's context (the browser's own UI targets never are)."""
        own = info.get("browserContextId") == self.episode.context_id
        return own and info.get("type") not in _BROWSER_UI


class CdpHub:
    """The run's browser for protocol agents and the endpoints into it."""

    def __init__(
        self, *, executable: str | None = None, sandbox: BrowserSandbox | None = None
    ) -> None:
        self.pipe = CdpPipe(self._on_message, sandbox=sandbox)
        self._executable = executable
        self.owners: dict[str, _Client] = {}
        self._contexts: dict[str, str] = {}  # target id -> its browser context id
        self._pages: set[str] = set()
        self._episodes: dict[str, CdpEpisode] = {}  # by token
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def open_episodes(self) -> int:
        return len(self._episodes)

    async def start(self) -> None:
        await self.pipe.start(executable=self._executable, args=BROWSER_FLAGS)
        try:
            await self.pipe.call("Target.setDiscoverTargets", {"discover": True})
            app = web.Application()
            app.router.add_get(PATH + "{token}", self._serve)
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
        if method == "Target.targetCreated" and info.get("type") not in _BROWSER_UI:
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
                    if client.auto_attach:
                        asyncio.ensure_future(client.attach(target))

    # ------------------------------------------------------------ the endpoint

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        episode = self._episodes.get(request.match_info["token"])
        if episode is None or episode.closed:
            raise web.HTTPNotFound(text="no such episode endpoint (closed, or never opened)\n")
        ws = web.WebSocketResponse(max_msg_size=64 << 20, autoping=True)
        await ws.prepare(request)
        client = _Client(self, episode, ws)
        episode.clients.append(client)  # from now on, closing the episode drops it
        try:
            root = (await self.pipe.call("Target.attachToBrowserTarget"))["sessionId"]
        except CdpError:
            root = None
        if root is None or episode.closed:
            await self._drop(client)
            if root is not None:
                await self._detach(root)
            return ws
        client.root = root
        self.owners[root] = client
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

    async def _drop(self, client: _Client) -> None:
        """Forget a connection's sessions, detach its browser session, close its socket."""
        if client in client.episode.clients:
            client.episode.clients.remove(client)
        for session in (*client.sessions, client.root):
            self.owners.pop(session, None)
        if client.root:
            await self._detach(client.root)
        client.stop()
        await client.ws.close()

    async def _detach(self, session: str) -> None:
        if self.pipe.alive:
            with contextlib.suppress(CdpError):
                await self.pipe.call(
                    "Target.detachFromTarget", {"sessionId": session}, timeout_s=3.0
                )


__all__ = ["PATH", "CdpEpisode", "CdpHub"]
