"""I Hate Money tests run on asyncio (aiohttp, uvicorn)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
