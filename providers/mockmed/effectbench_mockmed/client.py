"""The arm-facing channels into MockMed: a form driver and the product's own readback.

Both speak HTTP to the product, like any user or API client would; neither holds a
path to the database or to the harness oracle. The client is aiohttp (asyncio only;
anyio runs on its asyncio backend here): at concurrency 64 it costs about a quarter of
the CPU per request that httpx did in this one-process setup (docs/performance.md).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Final

import aiohttp
import orjson

from effectbench.model import JSONScalar, Row, Snapshot
from effectbench.provider import ProductResponse, Telemetry

_BANNER: Final = re.compile(r"<div id='banner' class='(saved|error)'>([^<]*)</div>")


class Connections:
    """One keep-alive connection pool for the run, shared by every episode's session.

    aiohttp hands a connection back to the pool only when its response was read to the
    end; one left with an unfinished request (cancelled, timed out, failed, body not
    read) is closed, so a later episode never reads an earlier episode's late answer.
    No connection limit: each concurrently requesting episode gets its own connection,
    so an episode's timeout never runs while it waits behind other episodes' requests.
    """

    def __init__(self) -> None:
        # Must be built inside the running event loop (aiohttp binds it there).
        self._connector = aiohttp.TCPConnector(limit=0)

    def session(self, base_url: str, timeout_s: float) -> aiohttp.ClientSession:
        """One episode's session: its token's base URL, its timeout, and no cookie jar,
        so no cookie or auth state crosses from one episode to another. Closing it
        leaves the shared pool open."""
        return aiohttp.ClientSession(
            base_url,
            connector=self._connector,
            connector_owner=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            trust_env=False,
        )

    async def close(self) -> None:
        await self._connector.close()


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
        session: aiohttp.ClientSession,
        telemetry: Telemetry,
        submit_timeout_s: float | None = None,
    ) -> None:
        """``submit_timeout_s``: give up on a save after this long, as a browser's page
        would, and show no saved banner (None: the session's own timeout, errors propagate)."""
        self._session = session
        self._telemetry = telemetry
        self._submit_timeout = (
            None if submit_timeout_s is None else aiohttp.ClientTimeout(total=submit_timeout_s)
        )

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        form = {k: "" if v is None else str(v) for k, v in values.items()}
        if self._submit_timeout is not None:
            try:
                status, page = await self._post(form, self._submit_timeout)
            except TimeoutError:
                self._telemetry.action("submit_form", status=None, screen_says_saved=False)
                return ProductResponse(
                    screen_says_saved=False, status=None, message="The page stopped responding"
                )
        else:
            status, page = await self._post(form, None)
        saved, message = read_banner(page)
        self._telemetry.action("submit_form", status=status, screen_says_saved=saved)
        return ProductResponse(screen_says_saved=saved, status=status, message=message)

    async def _post(
        self, form: Mapping[str, str], timeout: aiohttp.ClientTimeout | None
    ) -> tuple[int, str]:
        if timeout is None:
            request = self._session.post("encounters", data=form)
        else:
            request = self._session.post("encounters", data=form, timeout=timeout)
        async with request as resp:
            return resp.status, (await resp.read()).decode("utf-8", "replace")


class RestReadback:
    """The product's own record readback: one GET of its JSON read endpoint."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def read(self) -> Snapshot:
        try:
            async with self._session.get("api/encounters") as resp:
                status, body = resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Snapshot.unreadable(f"readback request failed: {type(exc).__name__}: {exc}")
        if status != 200:
            return Snapshot.unreadable(f"readback answered HTTP {status}")
        try:
            parsed = orjson.loads(body)
            rows: tuple[Row, ...] = tuple(dict(r) for r in parsed["encounters"])
        except (ValueError, KeyError, TypeError) as exc:
            return Snapshot.unreadable(f"readback body is not the expected JSON: {exc}")
        return Snapshot(readable=True, tables={"encounters": rows})
