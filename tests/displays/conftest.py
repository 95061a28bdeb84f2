"""The GTK form (gtk_form.py) on a display served over VNC, shared by the pixels-only
toolkit's tests and the computer-use arm's remote-display test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from effectbench.displays import DisplayPool
from effectbench.displays.pixels import Screen
from effectbench.displays.rfb import open_rfb
from effectbench.displays.vnc import VncChannel, serve_vnc

FORM = Path(__file__).with_name("gtk_form.py")
SYSTEM_PYTHON = "/usr/bin/python3"
"""The interpreter python3-gi is installed for (not the harness's venv)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def remote_form() -> AsyncIterator[tuple[VncChannel, Screen]]:
    """The form's window on a display served over VNC: the episode's channel and the
    test's own pixels-only view of it (a connection of its own)."""
    pool = DisplayPool(displays=1, vnc=True)
    await pool.start()
    try:
        async with pool.episode() as display, serve_vnc(display) as channel:
            pool.launch(display, [SYSTEM_PYTHON, str(FORM), "Triage note"])
            async with open_rfb(channel.password, host=channel.host, port=channel.port) as rfb:
                yield channel, Screen(rfb)
    finally:
        await pool.stop()
