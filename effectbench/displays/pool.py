"""The harness's displays: one per concurrent episode, reset between episodes.

Reset means a new server, not a tidied one: the episode's clients are killed, its Xvfb
and buses stopped, and fresh ones started in their place, so nothing an episode left on
its screen, its root window or its buses (windows, properties, selections, bus names)
reaches the next one. A client the harness did not launch loses its display and its
buses; one launched through :meth:`DisplayPool.launch` is killed.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import anyio
import structlog

from effectbench.core.errors import one_line
from effectbench.displays.server import Display, DisplayServer
from effectbench.displays.tools import DisplayTools, find_tools, vnc_tools

log = structlog.get_logger("effectbench.displays.pool")

__all__ = ["GEOMETRY", "DisplayPool"]

GEOMETRY: Final = "1024x720x24"
"""The browser's viewport (browser/pool.py), in 24-bit colour."""


class DisplayPool:
    """``displays`` virtual displays, started together; ``episode()`` lends one."""

    def __init__(
        self,
        *,
        displays: int = 1,
        geometry: str = GEOMETRY,
        tmp_dir: Path | None = None,
        grow: bool = False,
        vnc: bool = False,
        accessibility: bool = True,
    ) -> None:
        """``grow``: when every display is lent, ``episode()`` starts one more instead of
        waiting (for an owner that does not know its concurrency, such as a provider),
        and a display an episode gave back is stopped and started again only when it is
        next lent, so nothing of a display runs between its episodes.

        ``accessibility``: give each display its accessibility bus and registry (where
        at-spi2-core is installed). False for a display an arm may only see as pixels
        (remote_display): no tree exists to leak, and a display costs two processes
        less (docs/performance.md, "remote_display")."""
        if displays < 1:
            raise ValueError(f"a display pool needs at least one display, got {displays}")
        self._size = displays
        self._geometry = geometry
        self._vnc = vnc
        """Serve each display over VNC (Xvnc in Xvfb's place; displays/server.py)."""
        self._accessibility = accessibility
        self._tmp_dir = tmp_dir
        self._grow = grow
        self._tools: DisplayTools | None = None
        self._servers: list[DisplayServer] = []
        capacity = math.inf if grow else displays
        self._free_send, self._free = anyio.create_memory_object_stream[DisplayServer](capacity)
        self._lent: dict[int, DisplayServer] = {}

    async def start(self) -> None:
        """Start every display; DisplaysUnavailable (nothing started) when the host
        lacks Xvfb or dbus-daemon, DisplayStartError when one fails to start."""
        if self._servers:
            raise RuntimeError("DisplayPool.start() called twice; call stop() first")
        tools = self._tools = find_tools()
        if self._vnc:
            vnc_tools(tools)  # missing: one line before anything starts
        self._servers = [self._server(tools) for _ in range(self._size)]
        failures: list[Exception] = []
        try:
            async with anyio.create_task_group() as group:
                for server in self._servers:
                    group.start_soon(_start, server, failures)
            if failures:
                raise failures[0]
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop()
            raise
        for server in self._servers:
            self._free_send.send_nowait(server)

    async def stop(self) -> None:
        """Stop every display, lent or not: nothing of the pool runs after it."""
        servers, self._servers = self._servers, []
        self._lent.clear()
        with anyio.CancelScope(shield=True):
            for server in servers:
                await server.stop()
        while True:
            try:
                self._free.receive_nowait()
            except anyio.WouldBlock:
                break

    @asynccontextmanager
    async def episode(self) -> AsyncIterator[Display]:
        """A display for one episode (waiting for one to be free), reset when the
        block ends, however it ends."""
        if not self._servers:
            raise RuntimeError("DisplayPool.episode() before start(): await pool.start() first")
        server = await self._lend()
        number: int | None = None
        try:
            display = server.display or await server.start()
            number = display.number
            self._lent[number] = server
            yield display
        finally:
            if number is not None:
                self._lent.pop(number, None)
            with anyio.CancelScope(shield=True):
                await self._reset(server)

    async def _lend(self) -> DisplayServer:
        """A free display; with ``grow``, a new one (started by ``episode()``) when
        none is free."""
        if self._grow and self._tools is not None:
            try:
                return self._free.receive_nowait()
            except anyio.WouldBlock:
                server = self._server(self._tools)
                self._servers.append(server)
                return server
        return await self._free.receive()

    def _server(self, tools: DisplayTools) -> DisplayServer:
        return DisplayServer(
            tools, self._geometry, self._tmp_dir, vnc=self._vnc, accessibility=self._accessibility
        )

    async def _reset(self, server: DisplayServer) -> None:
        await server.stop()
        if server not in self._servers:
            return  # the pool was stopped meanwhile
        if self._grow:  # started again when next lent: nothing of it runs between episodes
            self._free_send.send_nowait(server)
            return
        try:
            await server.start()
        except Exception as exc:  # noqa: BLE001 - the next episode() starts it again, or says why
            log.error("display.reset_failed", error=one_line(exc))
        self._free_send.send_nowait(server)

    def launch(
        self,
        display: Display,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        keep: int = -1,
    ) -> subprocess.Popen[bytes]:
        """A client on ``display`` that is killed when its episode ends, with ``stop()``
        and with the harness (``keep``: a file descriptor left open in it)."""
        server = self._lent.get(display.number)
        if server is None or server.display != display:
            raise RuntimeError(f"display {display.name} is not lent to an episode of this pool")
        return server.launch(argv, env=env, keep=keep)


async def _start(server: DisplayServer, failures: list[Exception]) -> None:
    """One display of ``start()``: its failure kept, so the first is raised as itself."""
    try:
        await server.start()
    except Exception as exc:  # noqa: BLE001 - raised by start() once every display is done
        failures.append(exc)
