"""One D-Bus client relayed to a bus by the harness, which answers its handshake.

A contained agent cannot authenticate to its display's accessibility bus on its own:
the bus (dbus-daemon, displays/server.py) admits only the user it runs as, and the
agent is nobody; with a harness that is not root the agent is the harness's uid on the
host but 65534 in its user namespace, so the identity its EXTERNAL claim names and the
one the kernel reports for its socket disagree and the bus rejects it either way. So
the harness stands between them: it authenticates to the bus as itself, answers the
client's side of the handshake (EXTERNAL, with whatever identity the client claims:
only the one sandbox given the relay's socket can connect), hands the client the bus's
GUID, and from the client's ``BEGIN`` on copies bytes both ways. Passing Unix file
descriptors is declined with the ``ERROR`` the D-Bus specification allows a server that
cannot (the client goes on without); AT-SPI passes none.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Final, Literal

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from effectbench.displays.vnc import splice

__all__ = ["BusHandshakeError", "relay_bus", "server_reply", "unix_path"]

HANDSHAKE_TIMEOUT_S: Final = 10.0
"""How long the bus and the client together have to finish the handshake."""
MAX_LINE: Final = 16_384
"""The longest handshake line read (a line is a command and a hex string)."""
REJECTED: Final = b"REJECTED EXTERNAL\r\n"
NO_FDS: Final = b'ERROR "the relay does not pass file descriptors"\r\n'

State = Literal["auth", "data", "ok", "begun"]
"""The server side's states: waiting for AUTH, for DATA, for BEGIN; relaying."""


class BusHandshakeError(Exception):
    """The bus refused the harness, or the client broke the handshake."""


def unix_path(address: str) -> str:
    """The socket path of a D-Bus address ``unix:path=...`` (its first entry; other
    keys such as ``guid`` are ignored). ValueError for any other transport."""
    transport, _, pairs = address.split(";", 1)[0].partition(":")
    keys = dict(pair.partition("=")[::2] for pair in pairs.split(",") if pair)
    if transport != "unix" or "path" not in keys:
        raise ValueError(f"not a unix:path= D-Bus address: {address!r}")
    return os.fsdecode(urllib.parse.unquote_to_bytes(keys["path"]))


def server_reply(state: State, command: bytes, guid: bytes) -> tuple[State, bytes]:
    """The server side of the D-Bus handshake: the next state and the reply to one
    ``command`` line (without its CRLF). BusHandshakeError for ``BEGIN`` before the
    client is authenticated (the specification has the server disconnect)."""
    word, _, argument = command.partition(b" ")
    if word == b"AUTH" and state == "auth":
        mechanism, _, response = argument.partition(b" ")
        if mechanism != b"EXTERNAL":
            return "auth", REJECTED
        return ("ok", b"OK " + guid + b"\r\n") if response else ("data", b"DATA\r\n")
    if word == b"DATA" and state == "data":
        return "ok", b"OK " + guid + b"\r\n"
    if word == b"BEGIN":
        if state != "ok":
            raise BusHandshakeError("the client sent BEGIN before it was authenticated")
        return "begun", b""
    if word == b"NEGOTIATE_UNIX_FD" and state == "ok":
        return "ok", NO_FDS
    if word in (b"CANCEL", b"ERROR"):
        return "auth", REJECTED
    return state, b'ERROR "unexpected command"\r\n'


async def _authenticate(bus: anyio.abc.ByteStream) -> tuple[bytes, bytes]:
    """Authenticate to ``bus`` as this process (EXTERNAL); its GUID and any bytes it
    sent after its ``OK`` (none, from a conforming bus)."""
    identity = str(os.geteuid()).encode().hex().encode()
    await bus.send(b"\0AUTH EXTERNAL " + identity + b"\r\n")
    reader = BufferedByteReceiveStream(bus)
    reply = await reader.receive_until(b"\r\n", MAX_LINE)
    if not reply.startswith(b"OK "):
        raise BusHandshakeError(f"the bus refused the harness: {reply[:80]!r}")
    await bus.send(b"BEGIN\r\n")
    return reply[3:].strip(), bytes(reader.buffer)


async def _greet(client: anyio.abc.ByteStream, guid: bytes) -> bytes:
    """Answer the client's handshake; the bytes it sent after its ``BEGIN``."""
    reader = BufferedByteReceiveStream(client)
    if await reader.receive_exactly(1) != b"\0":
        raise BusHandshakeError("the client did not start with the handshake's NUL byte")
    state: State = "auth"
    while state != "begun":
        line = await reader.receive_until(b"\r\n", MAX_LINE)
        state, reply = server_reply(state, line, guid)
        if reply:
            await client.send(reply)
    return bytes(reader.buffer)


async def relay_bus(client: anyio.abc.ByteStream, path: str) -> None:
    """Relay ``client`` to the bus listening at ``path`` until either side closes. The
    client's connection is closed when the bus is gone (its display is being reset),
    refuses the harness, or the handshake is not done within HANDSHAKE_TIMEOUT_S."""
    try:
        bus = await anyio.connect_unix(path)
    except OSError:
        return
    async with bus:
        try:
            with anyio.fail_after(HANDSHAKE_TIMEOUT_S):
                guid, from_bus = await _authenticate(bus)
                from_client = await _greet(client, guid)
            if from_bus:
                await client.send(from_bus)
            if from_client:
                await bus.send(from_client)
        except (
            TimeoutError, BusHandshakeError, OSError, anyio.EndOfStream,
            anyio.IncompleteRead, anyio.DelimiterNotFound,
            anyio.BrokenResourceError, anyio.ClosedResourceError,
        ):  # fmt: skip
            return
        await splice(client, bus)
