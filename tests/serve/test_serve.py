"""The public serving helper: an ASGI app on a pre-bound loopback socket, then stopped."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from effectbench.serve import LocalServer, serving

pytestmark = pytest.mark.anyio


async def _hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-a", b"1")]})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


async def test_serves_on_loopback_and_stops() -> None:
    async with serving(_hello, label="hello server") as server:
        url = server.base_url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        async with httpx.AsyncClient() as client:
            resp = await client.get(url + "x/y")
        assert resp.status_code == 200 and resp.text == "/x/y"
        assert resp.headers["x-a"] == "1"
    port = server.port
    assert port is not None
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


async def test_start_twice_is_an_error_and_stop_is_idempotent() -> None:
    server = LocalServer(_hello, label="hello server")
    await server.start()
    try:
        with pytest.raises(RuntimeError, match="hello server already started"):
            await server.start()
    finally:
        await server.stop()
    await server.stop()


def test_base_url_before_start_says_so() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = LocalServer(_hello).base_url
