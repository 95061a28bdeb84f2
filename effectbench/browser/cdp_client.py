"""One agent's connection to an episode's CDP endpoint, and what it may reach.

``CdpClient`` is the filtering half of ``effectbench.browser.cdp_proxy`` (whose
docstring gives the rules): the browser-level sessions it holds on the harness's pipe,
the allow-list of browser commands, the emulated ``Target.setAutoAttach``, the target
events and replies filtered to the episode's context, and the session messages held to
``cdp_rules``. The hub (``CdpHub``) routes the pipe's messages to it and owns the
browser and the endpoints; the client reaches the hub only through ``Hub``.
"""

from __future__ import annotations

import asyncio
from typing import Final, Protocol

import attrs
import orjson
import structlog
from aiohttp import web

from effectbench.browser import cdp_rules
from effectbench.browser.cdp import CdpError, CdpPipe, Message
from effectbench.browser.gate import Gate
from effectbench.browser.policy import OriginPolicy

log = structlog.get_logger("effectbench.browser")

PROXY_IDS: Final = 2_000_000_000
"""Command ids at or above this are the proxy's own on an agent's session; an agent's
are refused there."""
_REFUSED: Final = -32000

_PINNED_CONTEXT: Final = frozenset({
    "Storage.getCookies", "Storage.setCookies", "Storage.clearCookies", "Target.createTarget",
})  # fmt: skip
_OWN_TARGET: Final = frozenset({
    "Target.attachToTarget", "Target.closeTarget", "Target.activateTarget",
})  # fmt: skip
_PASS: Final = frozenset({"Browser.getVersion", "Target.setDiscoverTargets"})
_BROWSER_SESSION: Final = "Target.attachToBrowserTarget"
BROWSER_UI: Final = frozenset({"browser", "browser_ui", "tab"})
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
    clients: list[CdpClient] = attrs.field(factory=list)
    closed: bool = False


def _error(ident: object, message: str, session: str | None = None) -> Message:
    reply: Message = {"id": ident, "error": {"code": _REFUSED, "message": message}}
    if session is not None:
        reply["sessionId"] = session
    return reply


class Hub(Protocol):
    """What a client needs of the hub that owns the pipe (``cdp_proxy.CdpHub``)."""

    pipe: CdpPipe
    owners: dict[str, CdpClient]
    """Which client holds each session on the pipe (its events go there)."""

    def post(self, msg: Message) -> None: ...

    def remember(self, target: str, context: str, *, page: bool = True) -> None: ...

    def context_of(self, target: object) -> str | None: ...

    def targets_of(self, context: str) -> list[str]: ...


class CdpClient:
    """One agent connection: its browser session on the pipe and what it may reach."""

    def __init__(self, hub: Hub, episode: CdpEpisode, ws: web.WebSocketResponse) -> None:
        self.hub = hub
        self.episode = episode
        self.ws = ws
        self.root: str = ""
        """The proxy's browser session for this connection's session-less commands."""
        self.browsers: set[str] = set()
        """Further browser-level sessions the client opened; held to the root's rules."""
        self.page: str | None = None
        """A page endpoint's session: its session-less commands go to that page."""
        self.sessions: set[str] = set()
        self.attached: dict[tuple[str, str], asyncio.Future[None]] = {}  # (via, target)
        self.auto: set[str] = set()  # browser sessions (root included) auto-attaching
        self.methods: dict[tuple[str | None, int], str] = {}  # browser-level, awaiting reply
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
        asked = session  # what the replies of the proxy's own carry
        if session is None and self.page is not None:
            session = self.page  # a page endpoint: session-less commands are its page's
        if session is not None and not self._holds(session):
            self.send(_error(ident, f"no session {session} on this endpoint", asked))
        elif method in cdp_rules.DOWNLOAD_BEHAVIOUR:
            # acknowledged, never forwarded: the context's "deny" (set at open) stands
            ack: Message = {"id": ident, "result": {}}
            self.send(ack if asked is None else {**ack, "sessionId": asked})
        elif session is None or session in self.browsers:
            await self._browser_command(ident, method, params, session)
        elif (why := cdp_rules.session_refusal(method, params, self.episode.policy)) is not None:
            self.send(_error(ident, why, asked))
        else:
            self.hub.post({**msg, "params": params, "sessionId": session})

    async def _browser_command(
        self, ident: int, method: str, params: Message, via: str | None
    ) -> None:
        """A browser-level command, on the root (``via`` None) or on a browser session
        the client opened: the same rules for both."""
        own = self.episode.context_id
        pipe_session = via or self.root
        extra: Message = {} if via is None else {"sessionId": via}
        if method == "Target.setAutoAttach":
            if params.get("autoAttach"):
                self.auto.add(pipe_session)
                for target in self.hub.targets_of(own):
                    await self.attach(target, pipe_session)
            else:
                self.auto.discard(pipe_session)
            self.send({"id": ident, "result": {}, **extra})
            return
        if method == "Target.getBrowserContexts":
            self.send({"id": ident, "result": {"browserContextIds": [own]}, **extra})
            return
        label = method
        if method == "Target.detachFromTarget":
            if not self._holds(params.get("sessionId")):
                self.send(_error(ident, "no such session on this endpoint", via))
                return
        elif method == "Target.attachToTarget" and await self._is_browser(
            params.get("targetId"), pipe_session
        ):
            label = _BROWSER_SESSION  # Puppeteer's browser-level session: one more like the root
        elif method in _OWN_TARGET or method == "Target.getTargetInfo":
            named = params.get("targetId")
            if named is None and method == "Target.getTargetInfo":
                pass  # the browser's own target
            elif self.hub.context_of(named) != own:
                self.send(_error(ident, "not a target of this episode's browser context", via))
                return
        elif method in _PINNED_CONTEXT:
            params = {**params, "browserContextId": own}
            refused = cdp_rules.url_refusal(method, params, self.episode.policy)
            if refused is not None:
                self.send(_error(ident, refused, via))
                return
        elif method not in _PASS and method not in ("Target.getTargets", _BROWSER_SESSION):
            self.send(_error(ident, f"{method} is not allowed through this endpoint", via))
            return
        self.methods[(via, ident)] = label
        self.hub.post({"id": ident, "method": method, "params": params, "sessionId": pipe_session})

    async def _is_browser(self, target: object, via: str) -> bool:
        """Whether ``target`` is the browser target (each browser session has its own id
        for it), which no episode's context holds: asked of the browser itself."""
        if not isinstance(target, str) or self.hub.context_of(target) is not None:
            return False
        self._ids += 1
        try:
            info = await self.hub.pipe.call(
                "Target.getTargetInfo", {"targetId": target}, session=via, ident=self._ids
            )
        except CdpError:
            return False
        return (info.get("targetInfo") or {}).get("type") == "browser"

    async def attach(self, target: str, via: str) -> None:
        """Give the agent a session on one of its own pages (what auto-attach would),
        announced on the browser session ``via`` that asked for it."""
        pending = self.attached.get((via, target))
        if pending is None:
            pending = asyncio.ensure_future(self._attach(target, via))
            self.attached[(via, target)] = pending
        await asyncio.shield(pending)

    async def _attach(self, target: str, via: str) -> None:
        self._ids += 1
        try:
            await self.hub.pipe.call(
                "Target.attachToTarget",
                {"targetId": target, "flatten": True},
                session=via,
                ident=self._ids,
            )
        except CdpError as exc:
            log.debug("cdp.attach_failed", target=target, error=str(exc))

    # ------------------------------------------------------------ from the browser

    def from_browser(self, msg: Message) -> None:
        session = msg.get("sessionId")
        method = msg.get("method")
        if session == self.root and self.page is not None:
            return  # a page endpoint's plumbing: its client never spoke browser-level
        browser_level = session == self.root or session in self.browsers
        if session == self.root or (self.page is not None and session == self.page):
            msg = {k: v for k, v in msg.items() if k != "sessionId"}
        if browser_level:
            if "id" in msg:
                self._reply(msg, None if session == self.root else str(session))
                return
            if not self._event_is_own(msg):
                return
        params = msg.get("params") or {}
        if method == "Target.attachedToTarget":
            child = params.get("sessionId")
            if isinstance(child, str):
                info = params.get("targetInfo") or {}
                self._own_session(child, browser=info.get("type") == "browser")
        elif method == "Target.detachedFromTarget":
            child = str(params.get("sessionId"))
            self.sessions.discard(child)
            self.browsers.discard(child)
            self.auto.discard(child)
            self.hub.owners.pop(child, None)
            target = params.get("targetId")
            if browser_level and isinstance(target, str):
                self.attached.pop((str(session), target), None)
        self.send(msg)

    def _holds(self, session: object) -> bool:
        """Whether ``session`` is one of this connection's (checked on every message:
        no set is built for it)."""
        return session in self.sessions or session in self.browsers

    def _own_session(self, session: str, *, browser: bool) -> None:
        (self.browsers if browser else self.sessions).add(session)
        self.hub.owners[session] = self

    def _reply(self, msg: Message, via: str | None) -> None:
        method = self.methods.pop((via, msg["id"]), None)
        result = msg.get("result")
        if method == "Target.getTargets" and isinstance(result, dict):
            infos = result.get("targetInfos") or []
            own = [i for i in infos if self._is_own(i)]
            msg = {**msg, "result": {**result, "targetInfos": own}}
        elif method == _BROWSER_SESSION and isinstance(result, dict):
            opened = result.get("sessionId")
            if isinstance(opened, str):  # held to the root's rules from its first command
                self._own_session(opened, browser=True)
        elif method == "Target.createTarget" and isinstance(result, dict):
            target = str(result.get("targetId"))
            # pinned to this context; known before the agent can name it in its next command
            self.hub.remember(target, self.episode.context_id)
            pipe_session = via or self.root
            if pipe_session in self.auto:
                asyncio.ensure_future(self._attach_then(target, pipe_session, msg))
                return
        self.send(msg)

    async def _attach_then(self, target: str, via: str, reply: Message) -> None:
        """A page the agent created: its attach event goes first, as Chromium's would."""
        await self.attach(target, via)
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
        """A target of this episode's context (the browser's own UI targets never are),
        or the browser target itself, which every client of a browser sees (Puppeteer
        opens its browser-level session on it)."""
        if info.get("type") == "browser":
            return True
        own = info.get("browserContextId") == self.episode.context_id
        return own and info.get("type") not in BROWSER_UI
