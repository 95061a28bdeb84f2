"""Shared fixtures. Async tests run on asyncio: MockMed's aiohttp client needs it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# No wall-clock limits on Hypothesis examples: on 2 loaded cores one example of a
# microsecond property took 410 ms against the default 200 ms deadline (FlakyFailure).
# A test's own @settings still applies on top of this profile.
settings.register_profile(
    "effectbench", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("effectbench")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """One real PostgreSQL server per test session (per xdist worker), from the wheel."""
    from effectbench.postgres.server import EmbeddedServer

    server = EmbeddedServer()
    dsn = server.start()
    try:
        yield dsn
    finally:
        server.stop()
