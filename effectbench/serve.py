"""Serve an ASGI app on 127.0.0.1 inside the caller's event loop (public helper).

Providers that own an HTTP product (MockMed) or put something in front of one (the
fault proxy, ``effectbench.faults.proxy``) all need the same thing: start the app,
know its URL before anyone connects, stop it without leaking a task. This module is
that one code path.

The socket is bound by us, not by uvicorn: the OS picks a free port (no race), and
creating it with IPPROTO_TCP keeps TCP_NODELAY on (without it every request paid
~43 ms of Nagle delay on this machine). uvicorn parses HTTP with httptools.

The server runs as a task of the running asyncio loop (uvicorn is asyncio-only, so
this needs anyio's asyncio backend, the default of ``anyio.run``), not inside an anyio
task group entered by ``start`` and left by ``stop``: callers legitimately call
``stop`` under a shielded cancel scope, and a task group cannot be exited from inside
a scope opened after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Generator
from typing import Any, Final

import anyio
import uvicorn

__all__ = ["STOP_TIMEOUT_S", "LocalServer", "serving"]

STOP_TIMEOUT_S: Final = 5.0


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signal handlers to the harness."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _bound_socket(port: int = 0) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:``port`` (0: the OS picks a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if port:  # a fixed port is often the one a stopped server just left in TIME_WAIT
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


class LocalServer:
    """One uvicorn server on 127.0.0.1:<OS-chosen port>.

    ``label`` names the server in errors ("MockMed's HTTP server failed: ...");
    ``port`` fixes the port (the viewer's ``--port``), else the OS picks a free one.
    """

    def __init__(self, app: Any, *, label: str = "HTTP server", port: int = 0) -> None:
        self._app = app
        self._label = label
        self._want_port = port
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/`` while started."""
        if self.port is None:
            raise RuntimeError(f"{self._label} is not started")
        return f"http://127.0.0.1:{self.port}/"

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError(f"{self._label} already started")
        sock = _bound_socket(self._want_port)
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

        task = asyncio.get_running_loop().create_task(serve(), name=f"uvicorn:{self._label}")
        self._task = task
        while not server.started:
            if task.done():
                error = task.exception() if not task.cancelled() else None
                self._server, self._task = None, None
                raise RuntimeError(f"{self._label} stopped during startup: {error!r}")
            await anyio.sleep(0.002)

    async def stop(self) -> None:
        """Stop serving (idempotent); re-raises a failure of the server task."""
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
            raise RuntimeError(f"{self._label} failed: {task.exception()!r}")


@contextlib.asynccontextmanager
async def serving(
    app: Any, *, label: str = "HTTP server", port: int = 0
) -> AsyncIterator[LocalServer]:
    """``async with serving(app) as server: server.base_url``: started, then stopped."""
    server = LocalServer(app, label=label, port=port)
    await server.start()
    try:
        yield server
    finally:
        with anyio.CancelScope(shield=True):
            await server.stop()
