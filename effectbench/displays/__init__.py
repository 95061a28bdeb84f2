"""Virtual X displays owned by the harness: the desktop and remote-display substrates'
screens (issue 28).

A :class:`DisplayPool` holds one Xvfb per concurrent episode, each with its own session
D-Bus and, where at-spi2-core is installed, its own accessibility bus. An episode gets a
:class:`Display` (its name, X socket and bus addresses) for as long as it runs; when it
ends the display is reset (its clients killed, a fresh server and buses in its place).
Every process of a display dies with ``stop()`` and with the harness, SIGKILL included
(docs/substrates.md).
"""

from __future__ import annotations

from effectbench.displays.pool import DisplayPool
from effectbench.displays.server import Display, DisplayStartError
from effectbench.displays.tools import DisplaysUnavailable

__all__ = ["Display", "DisplayPool", "DisplayStartError", "DisplaysUnavailable"]
