"""The arm-facing channels into MockMed: a form driver and the product's own readback.

Both speak HTTP to the product, like any user or API client would; neither holds a
path to the database or to the harness oracle.
"""

from __future__ import annotations

import html
import re
import ssl
from collections.abc import Mapping
from typing import Final

import httpx

from effectbench.model import JSONScalar, Row, Snapshot
from effectbench.provider import ProductResponse, Telemetry

_BANNER: Final = re.compile(r"<div id='banner' class='(saved|error)'>([^<]*)</div>")


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
