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

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Final

import anyio
import anyio.abc
import attrs
import orjson

from effectbench.displays.server import Display

__all__ = [
    "MAX_CONNECTIONS",
    "VNC_CHANNEL",
    "VncChannel",
    "VncEndpoint",
    "relay",
    "serve_vnc",
    "splice",
]

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


class VncEndpoint:
    """One episode's port: opened by ``start``, closed with every connection through
    it by ``aclose``, which any task may call (a provider provisions an episode in one
    task and tears it down in another, so no cancel scope spans the two)."""

    def __init__(self, display: Display) -> None:
        if display.vnc is None:
            raise ValueError(
                f"display {display.name} is not served over VNC: DisplayPool(vnc=True)"
            )
        self._vnc = display.vnc
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> VncChannel:
        self._server = await asyncio.start_server(self._relay, LOOPBACK, 0)
        port = int(self._server.sockets[0].getsockname()[1])
        return VncChannel(LOOPBACK, port, self._vnc.password)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # asyncio's server asks a finished handler for its exception, which for a
        # cancelled one (aclose) is CancelledError, logged as an error: end normally.
        with contextlib.suppress(asyncio.CancelledError):
            await self._relay_one(reader, writer)

    async def _relay_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._connections) >= MAX_CONNECTIONS or task is None:
            writer.close()
            return
        self._connections.add(task)
        try:
            try:
                up_reader, up_writer = await asyncio.open_unix_connection(self._vnc.socket)
            except OSError:
                return  # the display is gone (being reset): the client sees the close
            try:
                pumps = [
                    asyncio.ensure_future(_pump(reader, up_writer)),
                    asyncio.ensure_future(_pump(up_reader, writer)),
                ]
                try:
                    await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for pump in pumps:
                        pump.cancel()
                    await asyncio.gather(*pumps, return_exceptions=True)
            finally:
                up_writer.close()
        finally:
            writer.close()
            self._connections.discard(task)

    async def aclose(self) -> None:
        """Close the port and drop every connection through it."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        connections = list(self._connections)
        for task in connections:
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while chunk := await source.read(CHUNK):
            sink.write(chunk)
            await sink.drain()


@asynccontextmanager
async def serve_vnc(display: Display) -> AsyncIterator[VncChannel]:
    """``display``'s VNC server on a fresh port of 127.0.0.1 for as long as the block
    runs; every connection through it is closed when the block ends."""
    endpoint = VncEndpoint(display)
    try:
        yield await endpoint.start()
    finally:
        await endpoint.aclose()


async def relay(
    client: anyio.abc.ByteStream, connect: Callable[[], Awaitable[anyio.abc.ByteStream]]
) -> None:
    """Copy bytes both ways between ``client`` and what ``connect`` opens until either
    side closes."""
    try:
        server = await connect()
    except OSError:
        return  # the display is gone (being reset): the client sees its connection close
    async with server:
        await splice(client, server)


async def splice(one: anyio.abc.ByteStream, other: anyio.abc.ByteStream) -> None:
    """Copy bytes both ways between two open streams until either side closes."""
    async with anyio.create_task_group() as tg:

        async def pump(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                async for chunk in source:
                    await sink.send(chunk)
            tg.cancel_scope.cancel()

        tg.start_soon(pump, one, other)
        tg.start_soon(pump, other, one)
