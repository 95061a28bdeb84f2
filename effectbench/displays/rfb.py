"""A small RFB (VNC) client: framebuffer updates in, pointer and key events out.

It is all a pixels-only arm has of a remote_display episode (docs/substrates.md), and
what the harness's own framebuffer camera uses. RFB 3.8 with VNC authentication, the
framebuffer in 32-bit true colour (blue, green, red, pad in memory: what Pillow calls
``BGRX``), Raw and CopyRect rectangles and the DesktopSize pseudo-rectangle. It never
asks the server for anything but pixels: no clipboard is read, no extension is used.

One task drives a client at a time (its reads and writes are not interleaved). A read
is cancelled only while no message has begun to arrive, so a timeout never leaves the
stream in the middle of one.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

from effectbench.displays.frame import Frame

__all__ = ["KEYSYMS", "RfbClient", "RfbError", "keysym", "open_rfb"]

VERSION: Final = b"RFB 003.008\n"
VNC_AUTH: Final = 2
RAW: Final = 0
COPY_RECT: Final = 1
DESKTOP_SIZE: Final = -223
PIXEL_FORMAT: Final = struct.pack(">BBBBHHHBBB3x", 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)
"""32 bits per pixel, depth 24, little-endian, true colour, 8 bits a channel: red at
bit 16, green at 8, blue at 0, so a pixel's bytes are blue, green, red, pad."""
MESSAGE_TIMEOUT_S: Final = 30.0
"""The longest a message that has begun to arrive may take to arrive whole."""
BUTTONS: Final = {"left": 1, "middle": 2, "right": 4}
KEYSYMS: Final[Mapping[str, int]] = {
    "Return": 0xFF0D, "Tab": 0xFF09, "BackSpace": 0xFF08, "Escape": 0xFF1B,
    "Delete": 0xFFFF, "Home": 0xFF50, "End": 0xFF57, "Left": 0xFF51, "Up": 0xFF52,
    "Right": 0xFF53, "Down": 0xFF54, "Page_Up": 0xFF55, "Page_Down": 0xFF56,
    "Shift_L": 0xFFE1, "Control_L": 0xFFE3, "Alt_L": 0xFFE9, "space": 0x20,
}  # fmt: skip
"""X keysyms of the keys a driver presses by name (keysymdef.h)."""


class RfbError(Exception):
    """The server refused us (a wrong password) or broke the protocol; says which."""


def keysym(char: str) -> int:
    """The X keysym that types ``char``: Latin-1 characters are their own code, the
    rest of Unicode is 0x01000000 plus the code point (keysymdef.h); a newline is
    Return and a tab is Tab."""
    if char == "\n":
        return KEYSYMS["Return"]
    if char == "\t":
        return KEYSYMS["Tab"]
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return 0x01000000 | code


def _des_key(password: str) -> bytes:
    """VNC authentication's DES key: the password's first 8 bytes, NUL-padded, each
    byte's bits reversed (the protocol's quirk)."""
    raw = password.encode("latin-1", "replace")[:8].ljust(8, b"\0")
    return bytes(int(f"{byte:08b}"[::-1], 2) for byte in raw)


def _answer(challenge: bytes, password: str) -> bytes:
    # The same key three times is single DES (EDE with one key), which VNC uses.
    encryptor = Cipher(TripleDES(_des_key(password) * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge) + encryptor.finalize()


class RfbClient:
    """A connected, authenticated client; ``frame`` is the framebuffer as last updated."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._in = BufferedByteReceiveStream(stream)
        self._pending = False
        """A FramebufferUpdateRequest is out and its answer has not been read yet."""
        self.width = 0
        self.height = 0
        self.name = ""
        self._pixels = bytearray()
        self.updates = 0
        """FramebufferUpdate messages applied so far."""

    # ------------------------------------------------------------------ handshake

    async def handshake(self, password: str) -> None:
        greeting = await self._exactly(12)
        if not greeting.startswith(b"RFB "):
            raise RfbError("the peer is not a VNC server (no RFB greeting)")
        await self._stream.send(VERSION)
        count = (await self._exactly(1))[0]
        if count == 0:
            raise RfbError(f"the VNC server refused the connection: {await self._reason()}")
        offered = set(await self._exactly(count))
        if VNC_AUTH not in offered:
            raise RfbError(f"the VNC server offers no VNC authentication (types {sorted(offered)})")
        await self._stream.send(bytes([VNC_AUTH]))
        await self._stream.send(_answer(await self._exactly(16), password))
        (result,) = struct.unpack(">I", await self._exactly(4))
        if result != 0:
            raise RfbError(f"VNC authentication failed: {await self._reason()}")
        await self._stream.send(b"\x01")  # shared: never push another client off
        head = await self._exactly(24)
        self.width, self.height = struct.unpack(">HH", head[:4])
        (length,) = struct.unpack(">I", head[20:24])
        self.name = (await self._exactly(length)).decode("utf-8", "replace")
        self._pixels = bytearray(self.width * self.height * 4)
        encodings = (RAW, COPY_RECT, DESKTOP_SIZE)
        await self._stream.send(b"\x00\x00\x00\x00" + PIXEL_FORMAT)
        count = len(encodings)
        await self._stream.send(struct.pack(f">BxH{count}i", 2, count, *encodings))

    async def _reason(self) -> str:
        (length,) = struct.unpack(">I", await self._exactly(4))
        return (await self._exactly(length)).decode("utf-8", "replace") or "no reason given"

    async def _exactly(self, count: int) -> bytes:
        try:
            return await self._in.receive_exactly(count)
        except (anyio.EndOfStream, anyio.IncompleteRead):
            raise RfbError("the VNC server closed the connection") from None

    # ------------------------------------------------------------------ pixels

    @property
    def frame(self) -> Frame:
        """The framebuffer as of the last update applied (a copy)."""
        return Frame(self.width, self.height, bytes(self._pixels))

    async def capture(self) -> Frame:
        """The whole screen now: a full (non-incremental) update, waited for."""
        await self._drain()
        await self._request(incremental=False)
        await self._update(None)
        return self.frame

    async def changed(self, timeout_s: float) -> Frame | None:
        """The screen after its next change, or None when nothing changed within
        ``timeout_s`` (an incremental request is answered only once something did)."""
        if not self._pending:
            await self._request(incremental=True)
        return self.frame if await self._update(timeout_s) else None

    async def _request(self, *, incremental: bool) -> None:
        message = struct.pack(">BBHHHH", 3, int(incremental), 0, 0, self.width, self.height)
        await self._stream.send(message)
        self._pending = True

    async def _drain(self) -> None:
        """Read the answer to a request still out, so the next answer is the next one's."""
        if self._pending:
            await self._update(None)

    async def _update(self, timeout_s: float | None) -> bool:
        """Read messages until a FramebufferUpdate has been applied (True), or until
        ``timeout_s`` passes with none begun (False)."""
        wait = float("inf") if timeout_s is None else timeout_s
        while True:
            kind: int | None = None
            with anyio.move_on_after(wait):
                kind = (await self._exactly(1))[0]
            if kind is None:
                return False
            with anyio.fail_after(MESSAGE_TIMEOUT_S, shield=True):
                if kind == 0:
                    await self._apply_update()
                    self._pending = False
                    self.updates += 1
                    return True
                await self._skip(kind)

    async def _apply_update(self) -> None:
        (count,) = struct.unpack(">xH", await self._exactly(3))
        for _ in range(count):
            x, y, w, h, encoding = struct.unpack(">HHHHi", await self._exactly(12))
            if encoding == RAW:
                self._paint(x, y, w, h, await self._exactly(w * h * 4))
            elif encoding == COPY_RECT:
                sx, sy = struct.unpack(">HH", await self._exactly(4))
                self._paint(x, y, w, h, self._rect(sx, sy, w, h))
            elif encoding == DESKTOP_SIZE:
                self.width, self.height = w, h
                self._pixels = bytearray(w * h * 4)
            else:
                raise RfbError(f"the VNC server sent encoding {encoding}, which was not asked for")

    async def _skip(self, kind: int) -> None:
        """A message that carries no pixels: read past it."""
        if kind == 1:  # SetColourMapEntries (never sent for true colour)
            _, entries = struct.unpack(">xHH", await self._exactly(5))
            await self._exactly(entries * 6)
        elif kind == 2:  # Bell
            return
        elif kind == 3:  # ServerCutText: the clipboard is no pixel, and is not kept
            (length,) = struct.unpack(">3xI", await self._exactly(7))
            await self._exactly(length)
        else:
            raise RfbError(f"the VNC server sent message type {kind}, which RFB 3.8 does not have")

    def _paint(self, x: int, y: int, w: int, h: int, data: bytes) -> None:
        if x + w > self.width or y + h > self.height:
            size = f"{self.width}x{self.height}"
            raise RfbError(f"the VNC server sent a rectangle outside its {size} screen")
        row = w * 4
        for line in range(h):
            start = ((y + line) * self.width + x) * 4
            self._pixels[start : start + row] = data[line * row : (line + 1) * row]

    def _rect(self, x: int, y: int, w: int, h: int) -> bytes:
        row = w * 4
        return b"".join(
            self._pixels[((y + line) * self.width + x) * 4 :][:row] for line in range(h)
        )

    # ------------------------------------------------------------------ input

    async def move(self, x: int, y: int, buttons: int = 0) -> None:
        await self._stream.send(struct.pack(">BBHH", 5, buttons, x, y))

    async def click(self, x: int, y: int, button: str = "left") -> None:
        """Move there, press and release ``button``."""
        mask = BUTTONS[button]
        await self.move(x, y)
        await self.move(x, y, mask)
        await self.move(x, y)

    async def key(self, sym: int, *, down: bool | None = None) -> None:
        """Press and release the key ``sym`` (or only press or release it)."""
        for state in (True, False) if down is None else (down,):
            await self._stream.send(struct.pack(">BBxxI", 4, int(state), sym))

    async def press(self, name: str, *, with_keys: tuple[str, ...] = ()) -> None:
        """A named key (``KEYSYMS``) or a character's, with modifiers held
        (``press("a", with_keys=("Control_L",))``)."""
        for held in with_keys:
            await self.key(KEYSYMS[held], down=True)
        await self.key(KEYSYMS[name] if name in KEYSYMS else keysym(name))
        for held in reversed(with_keys):
            await self.key(KEYSYMS[held], down=False)

    async def type(self, text: str) -> None:
        """Type ``text`` key by key (the server adds Shift where a keysym needs it)."""
        for char in text:
            await self.key(keysym(char))


@asynccontextmanager
async def open_rfb(
    password: str, *, host: str | None = None, port: int | None = None, path: Path | None = None
) -> AsyncIterator[RfbClient]:
    """A client connected to ``host:port`` (TCP) or ``path`` (a Unix socket) and
    authenticated with ``password``; closed when the block ends."""
    if path is not None:
        stream: anyio.abc.ByteStream = await anyio.connect_unix(path)
    elif host is not None and port is not None:
        stream = await anyio.connect_tcp(host, port)
    else:
        raise ValueError("open_rfb needs host and port, or path")
    async with stream:
        client = RfbClient(stream)
        with anyio.fail_after(MESSAGE_TIMEOUT_S):
            await client.handshake(password)
        yield client
