"""One framebuffer as a VNC client received it: the pixels, and nothing else.

A ``Frame`` is what a pixels-only driver reads text and widgets from (displays/ocr.py,
displays/pixels.py) and what the harness keeps as evidence of what the screen showed
(a PNG stored by content hash, like the browser's screenshots).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["Box", "Frame"]


@attrs.frozen
class Box:
    """A rectangle on the screen, in framebuffer pixels."""

    x: int
    y: int
    width: int
    height: int

    @property
    def center(self) -> tuple[int, int]:
        return self.x + self.width // 2, self.y + self.height // 2

    @property
    def right(self) -> int:
        return self.x + self.width

    @property
    def bottom(self) -> int:
        return self.y + self.height


@attrs.frozen
class Frame:
    """``width`` x ``height`` pixels, 4 bytes each: blue, green, red, pad (RFB's
    32-bit little-endian true colour as displays/rfb.py asks for it)."""

    width: int
    height: int
    pixels: bytes = attrs.field(repr=False, eq=False)

    @classmethod
    def from_png(cls, png: bytes) -> Frame:
        """The frame a PNG shows (a screenshot as a model is sent it, read back)."""
        from PIL import Image

        with Image.open(io.BytesIO(png)) as image:
            rgb = image.convert("RGB")
        return cls(rgb.width, rgb.height, rgb.tobytes("raw", "BGRX"))

    def image(self, box: Box | None = None) -> Image.Image:
        """The frame (or the part of it in ``box``) as an RGB Pillow image."""
        from PIL import Image

        whole = Image.frombuffer("RGB", (self.width, self.height), self.pixels, "raw", "BGRX", 0, 1)
        if box is None:
            return whole
        return whole.crop((box.x, box.y, box.right, box.bottom))

    def png(self) -> bytes:
        """The frame as PNG bytes (fast compression: evidence is written per action)."""
        out = io.BytesIO()
        self.image().save(out, format="PNG", compress_level=1)
        return out.getvalue()

    def crop(self, box: Box) -> Frame:
        """The pixels in ``box`` as a frame of their own (a template to find later)."""
        row = box.width * 4
        stride = self.width * 4
        rows = (self.pixels[(box.y + r) * stride + box.x * 4 :][:row] for r in range(box.height))
        return Frame(box.width, box.height, b"".join(rows))

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        """The (red, green, blue) at ``x``, ``y``."""
        at = (y * self.width + x) * 4
        blue, green, red = self.pixels[at : at + 3]
        return red, green, blue
