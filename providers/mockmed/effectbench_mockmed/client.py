"""The arm-facing channels into MockMed: a form driver and the product's own readback.

Both speak HTTP to the product, like any user or API client would; neither holds a
path to the database or to the harness oracle.
"""

from __future__ import annotations

import html
import re
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Final

import httpx

from effectbench.model import JSONScalar, Row, Snapshot
from effectbench.provider import ProductResponse, Telemetry

_BANNER: Final = re.compile(r"<div id='banner' class='(saved|error)'>([^<]*)</div>")


class Transports:
    """Keep-alive transports lent one per live episode and reused by later episodes.

    A transport (its own httpcore pool, in practice one keep-alive connection) serves
    one episode at a time, so there is none of the contention one shared pool shows at
    concurrency 64, and reuse saves a TCP connect and accept per episode (measured at
    concurrency 64: 2.2 -> 1.55 ms CPU per screen_only episode). Each episode still gets
    its own AsyncClient (its token's base URL, its timeout). A transport whose episode
    left a request unfinished (cancelled, timed out, failed) is closed, not reused, just
    as a per-episode client's would be.
    """

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self._ssl_context = ssl_context
        self._free: list[LentTransport] = []
        self._lent: set[LentTransport] = set()

    def lend(self) -> LentTransport:
        lent = self._free.pop() if self._free else None
        if lent is None:
            lent = LentTransport(httpx.AsyncHTTPTransport(verify=self._ssl_context))
        self._lent.add(lent)
        return lent

    async def give_back(self, lent: LentTransport) -> None:
        self._lent.discard(lent)
        if lent.clean:
            self._free.append(lent)
        else:
            await lent.pool.aclose()

    async def close(self) -> None:
        pools = [t.pool for t in (*self._free, *self._lent)]
        self._free, self._lent = [], set()
        for pool in pools:
            await pool.aclose()


class LentTransport(httpx.AsyncBaseTransport):
    """A pooled transport as one episode's client sees it: closing the client leaves
    it open (the provider gives it back at teardown); tracks whether every response
    was read to its end."""

    def __init__(self, pool: httpx.AsyncHTTPTransport) -> None:
        self.pool = pool
        self.active = 0
        self.failed = False

    @property
    def clean(self) -> bool:
        return self.active == 0 and not self.failed

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.active += 1
        try:
            response = await self.pool.handle_async_request(request)
        except BaseException:
            self.active -= 1
            self.failed = True
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Tracked(response.stream, self)
        return response

    async def aclose(self) -> None:
        return None


class _Tracked(httpx.AsyncByteStream):
    """A response body that tells its transport when it was read to the end or dropped."""

    def __init__(self, inner: httpx.AsyncByteStream, owner: LentTransport) -> None:
        self._inner = inner
        self._owner = owner
        self._finished = False
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk
        self._finished = True

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._owner.active -= 1
        if not self._finished:
            self._owner.failed = True
        await self._inner.aclose()


def episode_client(
    base_url: str, transport: httpx.AsyncBaseTransport, timeout_s: float
) -> httpx.AsyncClient:
    """One client per episode over a lent transport; ``trust_env=False`` keeps proxy
    settings from rerouting 127.0.0.1."""
    return httpx.AsyncClient(
        base_url=base_url, transport=transport, timeout=timeout_s, trust_env=False
    )


def new_client(base_url: str, ssl_context: ssl.SSLContext, timeout_s: float) -> httpx.AsyncClient:
    """One client per episode. Passing a shared SSLContext skips the ~29 ms it costs to
    build one per client, even though MockMed speaks plain HTTP; ``trust_env=False``
    keeps proxy settings from rerouting 127.0.0.1."""
    return httpx.AsyncClient(
        base_url=base_url, verify=ssl_context, timeout=timeout_s, trust_env=False
    )


def read_banner(page: str) -> tuple[bool, str]:
    """(says saved, banner text) from a MockMed page; no banner means not saved."""
    m = _BANNER.search(page)
    if m is None:
        return False, ""
    return m.group(1) == "saved", html.unescape(m.group(2))


class FormDriver:
    """Submits the encounter form the way a browser would (urlencoded POST)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        telemetry: Telemetry,
        submit_timeout_s: float | None = None,
    ) -> None:
        """``submit_timeout_s``: give up on a save after this long, as a browser's page
        would, and show no saved banner (None: the client's own timeout, errors propagate)."""
        self._client = client
        self._telemetry = telemetry
        self._submit_timeout_s = submit_timeout_s

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        form = {k: "" if v is None else str(v) for k, v in values.items()}
        if self._submit_timeout_s is not None:
            try:
                resp = await self._client.post(
                    "encounters", data=form, timeout=self._submit_timeout_s
                )
            except httpx.TimeoutException:
                self._telemetry.action("submit_form", status=None, screen_says_saved=False)
                return ProductResponse(
                    screen_says_saved=False, status=None, message="The page stopped responding"
                )
        else:
            resp = await self._client.post("encounters", data=form)
        saved, message = read_banner(resp.text)
        self._telemetry.action("submit_form", status=resp.status_code, screen_says_saved=saved)
        return ProductResponse(screen_says_saved=saved, status=resp.status_code, message=message)


class RestReadback:
    """The product's own record readback: one GET of its JSON read endpoint."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def read(self) -> Snapshot:
        try:
            resp = await self._client.get("api/encounters")
        except httpx.HTTPError as exc:
            return Snapshot.unreadable(f"readback request failed: {type(exc).__name__}: {exc}")
        if resp.status_code != 200:
            return Snapshot.unreadable(f"readback answered HTTP {resp.status_code}")
        try:
            body = resp.json()
            rows: tuple[Row, ...] = tuple(dict(r) for r in body["encounters"])
        except (ValueError, KeyError, TypeError) as exc:
            return Snapshot.unreadable(f"readback body is not the expected JSON: {exc}")
        return Snapshot(readable=True, tables={"encounters": rows})
