"""Serve an ASGI app with uvicorn on 127.0.0.1 in the caller's event loop.

The socket is bound by us, not by uvicorn: the OS picks a free port (no race), and
creating it with IPPROTO_TCP keeps TCP_NODELAY on (without it every request paid
~43 ms of Nagle delay on this machine).

The server runs as a task of the running asyncio loop (uvicorn is asyncio-only),
not inside an anyio task group entered by ``start`` and left by ``stop``: callers
legitimately call ``stop`` under a shielded cancel scope, and a task group cannot
be exited from inside a scope opened after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Generator
from typing import Any, Final

import anyio
import uvicorn

STOP_TIMEOUT_S: Final = 5.0


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signal handlers to the harness."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class LocalServer:
    """One uvicorn server on 127.0.0.1:<OS-chosen port>."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        self.port: int | None = None

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("server already started")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.bind(("127.0.0.1", 0))
        except OSError:
            sock.close()
            raise
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            self._app,
            lifespan="off",
            access_log=False,
            log_config=None,
            log_level="warning",
            http="httptools",
            ws="none",
            timeout_graceful_shutdown=2,
            backlog=4096,
        )
        server = _QuietServer(config)
        self._server = server

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            finally:
                sock.close()

        task = asyncio.get_running_loop().create_task(serve(), name="mockmed-uvicorn")
        self._task = task
        while not server.started:
            if task.done():
                error = task.exception() if not task.cancelled() else None
                self._server, self._task = None, None
                raise RuntimeError(f"MockMed's HTTP server stopped during startup: {error!r}")
            await anyio.sleep(0.002)

    async def stop(self) -> None:
        server, task = self._server, self._task
        self._server, self._task = None, None
        if server is None or task is None:
            return
        server.should_exit = True
        done, _ = await asyncio.wait({task}, timeout=STOP_TIMEOUT_S)
        if not done:
            task.cancel()
            await asyncio.wait({task})
        if not task.cancelled() and task.exception() is not None:
            raise RuntimeError(f"MockMed's HTTP server failed: {task.exception()!r}")
