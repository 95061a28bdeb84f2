"""Shared fixtures. Async tests run on asyncio: MockMed's aiohttp client needs it."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
