"""Shared fixtures. Async tests run on asyncio: MockMed's aiohttp client needs it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """One real PostgreSQL server per test session (per xdist worker), from the wheel."""
    from effectbench.pgserver import EmbeddedServer

    server = EmbeddedServer()
    dsn = server.start()
    try:
        yield dsn
    finally:
        server.stop()
