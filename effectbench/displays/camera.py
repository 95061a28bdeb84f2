"""The harness's own camera on a display served over VNC: screenshots of an episode's
screen for a protocol agent on remote_display (its ``screenshot`` requests and
``--screenshots``), taken over the display's Unix socket, which only the harness can
open, never through the agent's port: the agent can neither forge the image nor point
the capture at another display.
"""

from __future__ import annotations

from effectbench.core.provider import PageViewport
from effectbench.displays.rfb import open_rfb
from effectbench.displays.server import VncServer

__all__ = ["FramebufferCamera"]


class FramebufferCamera:
    """``capture()``: the display's whole framebuffer now, as PNG (a connection of its
    own per capture: a few milliseconds on a Unix socket, and nothing held between)."""

    def __init__(self, vnc: VncServer, width: int, height: int) -> None:
        self._vnc = vnc
        self.viewport = PageViewport(width, height, 1.0)

    async def capture(self) -> bytes:
        async with open_rfb(self._vnc.password, path=self._vnc.socket) as rfb:
            frame = await rfb.capture()
        return frame.png()
