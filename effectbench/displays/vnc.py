"""An episode's ``vnc`` channel: its display's VNC server on a port of 127.0.0.1.

A display served over VNC listens on a Unix socket only the harness can open
(displays/server.py). For one episode, ``serve_vnc`` opens a TCP port on 127.0.0.1,
chosen by the kernel (port 0: two runs never race for one), and relays each connection
to that socket; when the episode ends the port closes and every connection through it
is dropped, whatever the client does. What the arm is given is ``VncChannel``: host,
port and the display's password, as the ``vnc`` entry of its channels; nothing else of
the display (its X socket, its buses, the product's HTTP port) is.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import anyio
import anyio.abc
import attrs
import orjson

from effectbench.displays.server import Display

__all__ = ["MAX_CONNECTIONS", "VNC_CHANNEL", "VncChannel", "relay", "serve_vnc"]

VNC_CHANNEL: Final = "vnc"
LOOPBACK: Final = "127.0.0.1"
MAX_CONNECTIONS: Final = 8
"""Connections one episode's port relays at once; more are closed at once (an arm that
opens sockets in a loop exhausts no file descriptors of the harness)."""
CHUNK: Final = 1 << 16


@attrs.frozen
class VncChannel:
    """Where an arm reaches its episode's screen: an RFB server at ``host:port`` that
    asks for ``password`` (VNC authentication)."""

    host: str
    port: int
    password: str = attrs.field(repr=False)

    def channels(self) -> dict[str, str]:
        """The episode's channel entry: ``{"vnc": "{\\"host\\": ..., ...}"}``."""
        value = {"host": self.host, "port": self.port, "password": self.password}
        return {VNC_CHANNEL: orjson.dumps(value).decode()}

    @classmethod
    def from_channels(cls, channels: Mapping[str, str]) -> VncChannel | None:
        """The ``vnc`` channel an episode's channels carry, or None when they carry
        none (or a malformed one)."""
        raw = channels.get(VNC_CHANNEL)
        if not raw:
            return None
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(value, dict):
            return None
        host, port, password = value.get("host"), value.get("port"), value.get("password")
        if isinstance(host, str) and isinstance(port, int) and isinstance(password, str):
            return cls(host, port, password)
        return None


@asynccontextmanager
async def serve_vnc(display: Display) -> AsyncIterator[VncChannel]:
    """``display``'s VNC server on a fresh port of 127.0.0.1 for as long as the block
    runs; every connection through it is closed when the block ends."""
    if display.vnc is None:
        raise ValueError(f"display {display.name} is not served over VNC: DisplayPool(vnc=True)")
    listener = await anyio.create_tcp_listener(local_host=LOOPBACK, local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    socket = display.vnc.socket
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(_accept, listener, socket)
        try:
            yield VncChannel(LOOPBACK, port, display.vnc.password)
        finally:
            tg.cancel_scope.cancel()


async def _accept(listener: anyio.abc.Listener[anyio.abc.SocketStream], socket: Path) -> None:
    limit = anyio.CapacityLimiter(MAX_CONNECTIONS)

    async def one(client: anyio.abc.SocketStream) -> None:
        async with client:
            try:
                limit.acquire_nowait()
            except anyio.WouldBlock:
                return
            try:
                await relay(client, lambda: anyio.connect_unix(socket))
            finally:
                limit.release()

    await listener.serve(one)


async def relay(
    client: anyio.abc.ByteStream, connect: Callable[[], Awaitable[anyio.abc.ByteStream]]
) -> None:
    """Copy bytes both ways between ``client`` and what ``connect`` opens until either
    side closes."""
    try:
        server = await connect()
    except OSError:
        return  # the display is gone (being reset): the client sees its connection close
    async with server, anyio.create_task_group() as tg:

        async def pump(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                async for chunk in source:
                    await sink.send(chunk)
            tg.cancel_scope.cancel()

        tg.start_soon(pump, client, server)
        tg.start_soon(pump, server, client)
