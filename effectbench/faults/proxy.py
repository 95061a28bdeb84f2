"""A fault-injecting reverse proxy: the C1-C7 taxonomy applied to any HTTP product.

A provider puts one ``FaultProxy`` in front of its real product per episode, hands the
arm the proxy's URL (the product must also *write* the proxy's URL into its pages and
redirects, or the next submission bypasses it), and configures it from the task's
fixture (``ProxyPlan.from_fixture``). Reads and every request the plan does not match
pass through verbatim; a matching write gets the plan's fault. Every request leaves a
``ProxyRecord``; the provider hands them to the harness through
``ProvisionedEpisode.injections``, and the log shows them as ``episode.injected``.

Forwarding rules a real product needs (each one broke something when missing):
``Host`` goes upstream unchanged (products check it against their own URL); no cookie
jar and no redirect following (a redirect and its ``Set-Cookie`` headers belong to the
client); bodies are forwarded as raw bytes (gzip passes untouched); hop-by-hop headers
and ``content-length`` are dropped and the length recomputed; response headers stay a
list, so several ``Set-Cookie`` survive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import anyio
import attrs

from effectbench.core.model import JSONScalar
from effectbench.core.provider import ActionRecord
from effectbench.faults.answers import Exchange, render
from effectbench.faults.forms import Form, parse_form
from effectbench.serve import LocalServer

if TYPE_CHECKING:
    import aiohttp

__all__ = ["PREFIX", "FaultKind", "FaultProxy", "ProxyPlan", "ProxyRecord"]

PREFIX: Final = "proxy."
"""Fixture keys the proxy reads: ``proxy.fault``, ``proxy.path``, ... (see ProxyPlan)."""

HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
WRITE_METHODS: Final = ("POST", "PUT", "PATCH", "DELETE")
UPSTREAM_TIMEOUT_S: Final = 30.0


class FaultKind(StrEnum):
    """What the proxy does to a matching write; the category each one realises."""

    PARTIAL = "partial"
    """C1: drop (or, with ``blank``, empty) the named fields, forward the rest."""
    DUPLICATE = "duplicate"
    """C2: forward, then forward the same bytes again; the client sees the first answer."""
    PHANTOM = "phantom"
    """C3: answer with the plan's response (a success page or redirect); forward nothing."""
    COMMIT_THEN_ERROR = "commit_then_error"
    """C3: forward (the write commits), then answer the plan's error (504 by default)."""
    STALE = "stale"
    """C4: forward, then replay the captured write with the plan's stale values."""
    DOUBLE = "double"
    """C5: deliver the write twice at once; the client sees the first delivery's answer."""
    WRONG_RECORD = "wrong_record"
    """C6: rewrite the target id (in the path and in field values) to a homonym's."""
    NOOP = "noop"
    """C7: answer the plan's success response; forward nothing."""


_ANSWERS: Final = frozenset({FaultKind.PHANTOM, FaultKind.NOOP, FaultKind.COMMIT_THEN_ERROR})


def _text(fixture: Mapping[str, JSONScalar], key: str, default: str = "") -> str:
    value = fixture.get(PREFIX + key)
    return default if value is None else str(value)


@attrs.frozen
class ProxyPlan:
    """One episode's fault, read from the task fixture's flat ``proxy.*`` keys.

    ``proxy.fault`` (a FaultKind), ``proxy.path`` (regex the request path must fully
    match; default any), ``proxy.methods`` (comma-separated; default the write methods),
    ``proxy.match.<field>`` (a form field that must have this value), ``proxy.times``
    (fault only the first N matching writes; default all), ``proxy.fields`` (C1:
    comma-separated names), ``proxy.blank`` (C1: empty instead of drop),
    ``proxy.status`` / ``proxy.body`` / ``proxy.location`` / ``proxy.content_type``
    (the answer of phantom, noop and commit_then_error; location and body are templates
    over the real exchange, ``effectbench.faults.answers``), ``proxy.id`` (the answer's
    ``${id}``), ``proxy.stale.<field>`` (C4:
    the values the replay carries), ``proxy.from`` / ``proxy.to`` (C6: the ids).
    """

    fault: FaultKind
    path: str = ".*"
    methods: tuple[str, ...] = WRITE_METHODS
    match: Mapping[str, str] = attrs.field(factory=dict)
    times: int | None = None
    fields: tuple[str, ...] = ()
    blank: bool = False
    status: int | None = None
    body: str = ""
    location: str = ""
    content_type: str = "text/html; charset=utf-8"
    id: str = ""
    stale: Mapping[str, str] = attrs.field(factory=dict)
    from_id: str = ""
    to_id: str = ""

    @classmethod
    def from_fixture(cls, fixture: Mapping[str, JSONScalar]) -> ProxyPlan | None:
        """The plan, or None when the fixture names no proxy fault (a pass-through)."""
        name = _text(fixture, "fault")
        if not name or name == "none":
            return None
        try:
            fault = FaultKind(name)
        except ValueError:
            known = ", ".join(k.value for k in FaultKind)
            raise ValueError(f"fixture proxy.fault {name!r} is not one of: none, {known}") from None
        status = fixture.get(PREFIX + "status")
        times = fixture.get(PREFIX + "times")
        plan = cls(
            fault=fault,
            path=_text(fixture, "path", ".*"),
            methods=tuple(
                m.strip().upper()
                for m in _text(fixture, "methods", ",".join(WRITE_METHODS)).split(",")
            ),
            match=_sub(fixture, "match."),
            times=None if times is None else int(str(times)),
            fields=tuple(f for f in _text(fixture, "fields").split(",") if f),
            blank=bool(fixture.get(PREFIX + "blank", False)),
            status=None if status is None else int(str(status)),
            body=_text(fixture, "body"),
            location=_text(fixture, "location"),
            content_type=_text(fixture, "content_type", "text/html; charset=utf-8"),
            id=_text(fixture, "id"),
            stale=_sub(fixture, "stale."),
            from_id=_text(fixture, "from"),
            to_id=_text(fixture, "to"),
        )
        plan.check()
        return plan

    def check(self) -> None:
        """Refuse a plan that cannot do what its fault says (a task-authoring error)."""
        need: dict[FaultKind, tuple[bool, str]] = {
            FaultKind.PARTIAL: (bool(self.fields), "proxy.fields"),
            FaultKind.STALE: (bool(self.stale), "proxy.stale.<field>"),
            FaultKind.WRONG_RECORD: (bool(self.from_id and self.to_id), "proxy.from and proxy.to"),
            FaultKind.PHANTOM: (bool(self.body or self.location), "proxy.body or proxy.location"),
        }
        ok, what = need.get(self.fault, (True, ""))
        if not ok:
            raise ValueError(f"proxy fault {self.fault.value} needs {what} in the task fixture")
        re.compile(self.path)

    def answer_status(self) -> int:
        if self.status is not None:
            return self.status
        if self.fault is FaultKind.COMMIT_THEN_ERROR:
            return 504
        return 303 if self.location else 200


def _sub(fixture: Mapping[str, JSONScalar], group: str) -> dict[str, str]:
    head = PREFIX + group
    return {
        k[len(head) :]: "" if v is None else str(v)
        for k, v in fixture.items()
        if k.startswith(head)
    }


@attrs.frozen
class ProxyRecord:
    """What the proxy did with one request (JSON scalars only: it becomes an event)."""

    action: str
    """``pass`` (verbatim) or the fault kind applied."""
    method: str
    path: str
    forwarded: int
    """How many times the request reached the product (0: answered by the proxy)."""
    upstream: str
    """The product's statuses, comma-separated, in delivery order ('' when none)."""
    answered: int
    """The status the client got."""
    note: str = ""

    def as_action(self) -> ActionRecord:
        return ActionRecord(
            f"proxy.{self.action}",
            {
                "method": self.method,
                "path": self.path,
                "forwarded": self.forwarded,
                "upstream": self.upstream,
                "answered": self.answered,
                "note": self.note,
            },
        )


@attrs.frozen
class _Request:
    method: str
    target: str
    """Path plus query, as received."""
    headers: tuple[tuple[str, str], ...]
    body: bytes
    seen: Exchange | None = None
    """Set on a faulted request: what a faked answer may repeat of it."""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def content_type(self) -> str:
        for k, v in self.headers:
            if k.lower() == "content-type":
                return v
        return ""

    def with_body(self, body: bytes, target: str | None = None) -> _Request:
        return attrs.evolve(self, body=body, target=self.target if target is None else target)


@attrs.frozen
class _Response:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


def _clean(headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Drop hop-by-hop headers (and those the Connection header names) and content-length."""
    named = {
        token.strip().lower()
        for k, v in headers
        if k.lower() == b"connection"
        for token in v.split(b",")
    }
    return [
        (k, v)
        for k, v in headers
        if k.lower().decode("latin-1") not in HOP_BY_HOP and k.lower() not in named
    ]


class _ProxyLoop(RuntimeError):
    """The proxy was asked to forward to itself (answered 502, never sent)."""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class _Upstream:
    """Forwards requests to the product over aiohttp: no jar, no redirects, no decoding."""

    def __init__(self, base: str) -> None:
        import aiohttp

        self._origin = _origin(base)
        self._session: aiohttp.ClientSession = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=UPSTREAM_TIMEOUT_S),
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
            trust_env=False,
        )

    def retarget(self, base: str) -> None:
        self._origin = _origin(base)

    @property
    def origin(self) -> str:
        return self._origin

    async def send(self, req: _Request) -> _Response:
        headers = [(k, v) for k, v in req.headers if k.lower() not in HOP_BY_HOP]
        async with self._session.request(
            req.method,
            self._origin + req.target,
            headers=headers,
            data=req.body if req.body else None,
            allow_redirects=False,
        ) as resp:
            body = await resp.read()
            return _Response(resp.status, tuple(resp.raw_headers), body)

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._session.close()


class _ProxyApp:
    """The raw ASGI app: read the request, decide, forward, answer, record."""

    def __init__(
        self, upstream: _Upstream, plan: ProxyPlan | None, redact: Callable[[str], str]
    ) -> None:
        self._upstream = upstream
        self._redact = redact
        self._plan = plan
        self._path = re.compile(plan.path) if plan is not None else None
        self._faulted = 0
        self.base = ""
        """The episode's base URL, set once the proxy listens (an answer's ``${base}``)."""
        self.own_origin = ""
        """Where the proxy itself listens, set with ``base``: never forwarded to."""
        self.records: list[ProxyRecord] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        req = await _read_request(scope, receive)
        try:
            resp, record = await self._handle(req)
        except Exception as exc:  # noqa: BLE001 - the product is unreachable or broke the exchange
            message = f"proxy could not reach the product: {type(exc).__name__}: {exc}"
            resp = _Response(
                502, ((b"content-type", b"text/plain; charset=utf-8"),), message.encode()
            )
            record = ProxyRecord("error", req.method, req.path, 0, "", 502, message[:300])
        self.records.append(attrs.evolve(record, path=self._redact(record.path)))
        await _write_response(send, resp)

    def _matches(self, req: _Request, form: Form | None) -> bool:
        plan = self._plan
        if plan is None or self._path is None or req.method not in plan.methods:
            return False
        if not self._path.fullmatch(req.path):
            return False
        if plan.times is not None and self._faulted >= plan.times:
            return False
        return all(form is not None and form.get(k) == v for k, v in plan.match.items())

    async def _handle(self, req: _Request) -> tuple[_Response, ProxyRecord]:
        if self._upstream.origin == self.own_origin:
            # a product port number taken by the proxy after the product had it checked
            # free: forwarding would call itself without end, a connection per hop
            raise _ProxyLoop(f"its upstream {self.own_origin} is the proxy itself")
        form = parse_form(req.content_type(), req.body) if req.body else None
        if not self._matches(req, form):
            resp = await self._upstream.send(req)
            return resp, ProxyRecord("pass", req.method, req.path, 1, str(resp.status), resp.status)
        self._faulted += 1
        plan = self._plan
        assert plan is not None
        exchange = Exchange(self.base, req.path, plan.id)
        return await _FAULTS[plan.fault](
            self._upstream, plan, attrs.evolve(req, seen=exchange), form
        )


async def _read_request(scope: dict[str, Any], receive: Any) -> _Request:
    chunks = []
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        more = bool(message.get("more_body", False))
    raw_path = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    target = raw_path.decode("latin-1") + (("?" + query.decode("latin-1")) if query else "")
    headers = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"])
    return _Request(scope["method"], target, headers, b"".join(chunks))


async def _write_response(send: Any, resp: _Response) -> None:
    headers = _clean(resp.headers)
    headers.append((b"content-length", str(len(resp.body)).encode()))
    await send({"type": "http.response.start", "status": resp.status, "headers": headers})
    await send({"type": "http.response.body", "body": resp.body})


def _answer(plan: ProxyPlan, req: _Request) -> _Response:
    location, text = render(plan.location, plan.body, req.seen or Exchange("", req.path, plan.id))
    headers: list[tuple[bytes, bytes]] = [(b"content-type", plan.content_type.encode("latin-1"))]
    if location:
        headers.append((b"location", location.encode("latin-1")))
    return _Response(plan.answer_status(), tuple(headers), text.encode("utf-8"))


def _record(
    plan: ProxyPlan, req: _Request, sent: Sequence[_Response], answered: int, note: str = ""
) -> ProxyRecord:
    upstream = ",".join(str(r.status) for r in sent)
    return ProxyRecord(plan.fault.value, req.method, req.path, len(sent), upstream, answered, note)


async def _partial(
    up: _Upstream, plan: ProxyPlan, req: _Request, form: Form | None
) -> tuple[_Response, ProxyRecord]:
    if form is None:
        resp = await up.send(req)
        return resp, _record(
            plan, req, [resp], resp.status, "body is not a form: forwarded unedited"
        )
    edited = form.blank(plan.fields) if plan.blank else form.drop(plan.fields)
    resp = await up.send(req.with_body(form.to_bytes()))
    verb = "blanked" if plan.blank else "dropped"
    return resp, _record(
        plan, req, [resp], resp.status, f"{verb}: {','.join(edited) or 'nothing (no such field)'}"
    )


async def _duplicate(
    up: _Upstream, plan: ProxyPlan, req: _Request, form: Form | None
) -> tuple[_Response, ProxyRecord]:
    first = await up.send(req)
    second = await up.send(req)
    return first, _record(
        plan, req, [first, second], first.status, "sent twice; answered the first"
    )


async def _double(
    up: _Upstream, plan: ProxyPlan, req: _Request, form: Form | None
) -> tuple[_Response, ProxyRecord]:
    got: list[_Response | None] = [None, None]

    async def deliver(i: int) -> None:
        got[i] = await up.send(req)

    async with anyio.create_task_group() as tg:
        tg.start_soon(deliver, 0)
        tg.start_soon(deliver, 1)
    sent = [r for r in got if r is not None]
    return sent[0], _record(
        plan, req, sent, sent[0].status, "delivered twice at once; answered delivery 1"
    )


async def _respond(
    up: _Upstream, plan: ProxyPlan, req: _Request, form: Form | None
) -> tuple[_Response, ProxyRecord]:
    resp = _answer(plan, req)
    return resp, _record(plan, req, [], resp.status, "answered by the proxy; nothing forwarded")


async def _commit_then_error(
    up: _Upstream, plan: ProxyPlan, req: _Request, form: Form | None
) -> tuple[_Response, ProxyRecord]:
    sent = await up.send(req)
    resp = _answer(plan, req)
    return resp, _record(plan, req, [sent], resp.status, "forwarded, then answered an error")


async def _stale(
    up: _Upstream, plan: ProxyPlan, req: _Request, form: Form | None
) -> tuple[_Response, ProxyRecord]:
    first = await up.send(req)
    if form is None:
        return first, _record(
            plan, req, [first], first.status, "body is not a form: no stale replay"
        )
    for name, value in plan.stale.items():
        form.set(name, value)
    replay = await up.send(req.with_body(form.to_bytes()))
    return first, _record(
        plan, req, [first, replay], first.status, f"replayed with stale {','.join(plan.stale)}"
    )


async def _wrong_record(
    up: _Upstream, plan: ProxyPlan, req: _Request, form: Form | None
) -> tuple[_Response, ProxyRecord]:
    old, new = plan.from_id, plan.to_id
    target = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])", new, req.target)
    changed = [] if form is None else form.replace_values(old, new)
    body = req.body if form is None else form.to_bytes()
    resp = await up.send(req.with_body(body, target))
    where = (["path"] if target != req.target else []) + changed
    masked = _mask(resp, new, old)
    return masked, _record(
        plan, req, [resp], resp.status, f"{old} -> {new} in {','.join(where) or 'nothing'}"
    )


def _mask(resp: _Response, new: str, old: str) -> _Response:
    """Point a redirect back at the intended record, so the screen shows the id the user asked
    for."""
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(new)}(?![A-Za-z0-9_])".encode())
    headers = tuple(
        (k, pattern.sub(old.encode(), v) if k.lower() == b"location" else v)
        for k, v in resp.headers
    )
    return attrs.evolve(resp, headers=headers)


_FAULTS: Final = {
    FaultKind.PARTIAL: _partial,
    FaultKind.DUPLICATE: _duplicate,
    FaultKind.PHANTOM: _respond,
    FaultKind.NOOP: _respond,
    FaultKind.COMMIT_THEN_ERROR: _commit_then_error,
    FaultKind.STALE: _stale,
    FaultKind.DOUBLE: _double,
    FaultKind.WRONG_RECORD: _wrong_record,
}


class FaultProxy:
    """One episode's proxy in front of ``upstream`` (a base URL), served on loopback.

    ``start`` then ``base_url``; ``records()`` is what it did so far; ``stop`` is
    idempotent. Needs anyio's asyncio backend (uvicorn and aiohttp).
    """

    def __init__(
        self,
        upstream: str,
        plan: ProxyPlan | None,
        *,
        label: str = "fault proxy",
        redact: Callable[[str], str] = str,
        base_path: str = "",
    ) -> None:
        """``redact`` rewrites a request path before it is recorded (e.g. to hide a
        per-episode secret token, which would also make two runs' logs differ);
        ``base_path`` is where the episode lives under the proxy's URL (``tp/``), so a
        faked answer's ``${base}`` is the URL the arm was handed."""
        self._upstream_url = upstream
        self._base_path = base_path.lstrip("/")
        self._redact = redact
        self._plan = plan
        self._label = label
        self._app: _ProxyApp | None = None
        self._server: LocalServer | None = None
        self._client: _Upstream | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError(f"{self._label} is not started")
        return self._server.base_url

    @property
    def port(self) -> int:
        if self._server is None or self._server.port is None:
            raise RuntimeError(f"{self._label} is not started")
        return self._server.port

    async def start(self) -> None:
        client = _Upstream(self._upstream_url)
        app = _ProxyApp(client, self._plan, self._redact)
        server = LocalServer(app, label=self._label)
        try:
            await server.start()
        except BaseException:
            await client.close()
            raise
        app.base = server.base_url + self._base_path
        app.own_origin = _origin(server.base_url)
        self._client, self._app, self._server = client, app, server

    def retarget(self, upstream: str) -> None:
        """Forward to ``upstream`` from now on (the product moved, e.g. to a fresh port)."""
        self._upstream_url = upstream
        if self._client is not None:
            self._client.retarget(upstream)

    def records(self) -> tuple[ProxyRecord, ...]:
        return () if self._app is None else tuple(self._app.records)

    def injections(self) -> tuple[ActionRecord, ...]:
        """The records as the harness logs them (``episode.injected`` events)."""
        return tuple(r.as_action() for r in self.records())

    async def stop(self) -> None:
        server, client = self._server, self._client
        self._server, self._client = None, None
        try:
            if server is not None:
                await server.stop()
        finally:
            if client is not None:
                await client.close()
