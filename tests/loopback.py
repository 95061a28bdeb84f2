"""A loopback port that accepts and answers like an HTTP server: a stand-in for the
product's or a browser's DevTools port in the containment tests, whose sandboxes must
not reach any port of the host's loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc


@asynccontextmanager
async def loopback_listener() -> AsyncIterator[int]:
    """A port of 127.0.0.1 that accepts every connection while the block runs."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)

    async def answer(client: anyio.abc.SocketStream) -> None:
        async with client:
            await client.send(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()
