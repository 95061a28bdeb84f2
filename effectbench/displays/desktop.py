"""A desktop application on an episode's display, and the arm's channel into it.

``DesktopApp.launch`` starts a client on a lent display (through the pool, so it dies
with the episode, with ``stop()`` and with the harness), waits for the line it writes
once its window is up, and finds the application it registered on that display's
accessibility bus. The ``desktop`` channel an arm gets (``DesktopChannel``) names
that bus and application and nothing else: the arm reads the tree and acts through
AT-SPI (``effectbench.displays.atspi``) on that one display.
"""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.to_thread
import attrs
import orjson

from effectbench.displays.atspi import AccessibilityBus, Node
from effectbench.displays.pool import DisplayPool
from effectbench.displays.server import Display, DisplayStartError, read_line

__all__ = ["DESKTOP_CHANNEL", "DesktopApp", "DesktopChannel", "exited", "start_client"]

DESKTOP_CHANNEL: Final = "desktop"
"""The channel key: JSON ``{"display", "a11y_bus", "application", "pid"}``."""
READY_TIMEOUT_S: Final = 20.0
"""How long a started client has to register on the accessibility bus."""
POLL_S: Final = 0.005
"""How often the registry is asked whether a just-started client has registered (it
does so while its toolkit starts, so this is rarely asked twice)."""


async def start_client(
    pool: DisplayPool,
    display: Display,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` on ``display`` with the number of a pipe appended, once the client
    wrote a line on it (it is ready: its window is up). The client dies with the episode,
    with the pool's ``stop()`` and with the harness."""
    read_fd, write_fd = os.pipe()
    try:
        proc = pool.launch(display, [*argv, str(write_fd)], env=env, keep=write_fd)
        os.close(write_fd)
        write_fd = -1
        await read_line(read_fd, f"the desktop client {argv[0]}")
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    return proc


def exited(proc: subprocess.Popen[bytes]) -> str | None:
    """Why a client is no longer there, or None while it runs."""
    code = proc.poll()
    return None if code is None else f"the desktop client exited with code {code}"


class DesktopApp:
    """One launched client: its process, its accessible application, a bus connection."""

    def __init__(
        self, display: Display, proc: subprocess.Popen[bytes], bus: AccessibilityBus, app: str
    ) -> None:
        self.display = display
        self.proc = proc
        self.bus = bus
        self.application = app

    @classmethod
    async def launch(
        cls,
        pool: DisplayPool,
        display: Display,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
    ) -> DesktopApp:
        """Start ``argv`` plus the number of a pipe it writes a line on once it is
        ready; the app once it is on the accessibility bus."""
        if display.a11y_bus is None:
            raise DisplayStartError(
                "this display has no accessibility bus: as root, apt-get install at-spi2-core"
            )
        proc = await start_client(pool, display, argv, env=env)
        bus = await AccessibilityBus(display.a11y_bus).connect()
        try:
            app = await _registered(bus, proc)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await bus.close()
            raise
        return cls(display, proc, bus, app)

    def channel(self) -> DesktopChannel:
        """The arm's ``desktop`` channel: where this app's accessibility tree is."""
        assert self.display.a11y_bus is not None
        return DesktopChannel(
            self.display.name, self.display.a11y_bus, self.application, self.proc.pid
        )

    async def tree(self) -> Node:
        """The application's accessibility tree now."""
        return await self.bus.tree(self.application)

    async def screenshot(self, frame: Node | None = None) -> bytes:
        """The application's window as the display shows it now, as PNG: the X server's
        own pixels (the harness's connection, not the arm's), cropped to ``frame``'s
        extents on the screen (None: the app's first frame, found in a fresh tree)."""
        if frame is None:
            frame = next((n for n in (await self.tree()).children if n.role == "frame"), None)
        box = None if frame is None else await self.bus.extents(frame)
        return await anyio.to_thread.run_sync(_grab, self.display.name, box)

    def gone(self) -> str | None:
        """Why the client is no longer there, or None while it runs."""
        return exited(self.proc)

    async def close(self) -> None:
        """Close the bus connection (the client itself dies with its display)."""
        await self.bus.close()


@attrs.frozen
class DesktopChannel:
    """Where an arm reaches its episode's desktop application: the display, that
    display's accessibility bus, and the application's name (and process) on it."""

    display: str
    a11y_bus: str
    application: str
    pid: int

    def channels(self) -> dict[str, str]:
        """The episode's channel entry: ``{"desktop": "{\\"display\\": ..., ...}"}``."""
        value = {
            "display": self.display,
            "a11y_bus": self.a11y_bus,
            "application": self.application,
            "pid": self.pid,
        }
        return {DESKTOP_CHANNEL: orjson.dumps(value).decode()}

    @classmethod
    def from_channels(cls, channels: Mapping[str, str]) -> DesktopChannel | None:
        """The ``desktop`` channel an episode's channels carry, or None when they carry
        none (or a malformed one)."""
        try:
            value = orjson.loads(channels.get(DESKTOP_CHANNEL) or "null")
            fields: dict[str, Any] = {
                f.name: _typed(value[f.name], f.type) for f in attrs.fields(cls)
            }
            return cls(**fields)
        except (orjson.JSONDecodeError, TypeError, KeyError):
            return None

    async def connect(self) -> AccessibilityBus:
        """An arm's own connection to the accessibility bus; read ``tree(application)``."""
        return await AccessibilityBus(self.a11y_bus).connect()


def _typed(value: object, kind: object) -> object:
    """``value`` when it is of the field's type (``str`` or ``int``), else TypeError."""
    if type(value) is not {"str": str, "int": int}.get(str(kind)):
        raise TypeError(f"{value!r} is not {kind}")
    return value


def _grab(display: str, box: tuple[int, int, int, int] | None) -> bytes:
    from PIL import ImageGrab

    image = ImageGrab.grab(xdisplay=display)
    if box is not None:
        x, y, width, height = box
        if width > 0 and height > 0:
            image = image.crop((x, y, x + width, y + height))
    out = io.BytesIO()
    image.save(out, "PNG")  # zlib's default level: 6 ms for a 640x520 window, 13 kB
    return out.getvalue()


async def _registered(bus: AccessibilityBus, proc: subprocess.Popen[bytes]) -> str:
    with anyio.move_on_after(READY_TIMEOUT_S):
        while True:
            app = await bus.application(proc.pid)
            if app is not None:
                return app
            await anyio.sleep(POLL_S)
    raise DisplayStartError(
        f"the desktop client did not register on the accessibility bus within "
        f"{READY_TIMEOUT_S:g} s (is its toolkit's AT-SPI bridge installed?)"
    )
