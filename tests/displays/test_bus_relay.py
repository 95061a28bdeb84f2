"""The harness's D-Bus relay (displays/bus_relay.py): four real client libraries reach
a real display's accessibility bus through it, each its own way through the handshake
(libdbus's dbus-send: AUTH EXTERNAL with its uid; GDBus's gdbus: AUTH first, to list the
mechanisms; sd-bus's busctl and dbus-fast: AUTH EXTERNAL, then an empty DATA; the first
three then ask to pass file descriptors and are told no); a client that breaks the
handshake is cut off."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest
from dbus_fast.aio import MessageBus
from dbus_fast.auth import UID_NOT_SPECIFIED, AuthExternal
from dbus_fast.errors import AuthError

from effectbench.displays import DisplayPool
from effectbench.displays.bus_relay import BusHandshakeError, relay_bus, server_reply, unix_path

pytestmark = pytest.mark.anyio

REGISTRY = "org.a11y.atspi.Registry"
DBUS = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def _relayed(tmp_path: Path) -> AsyncIterator[str]:
    """A display's accessibility bus behind the relay: the relay's address."""
    pool = DisplayPool(displays=1)
    await pool.start()
    try:
        async with pool.episode() as display:
            assert display.a11y_bus is not None
            bus = unix_path(display.a11y_bus)
            relay = tmp_path / "relay"
            listener = await anyio.create_unix_listener(relay)

            async def one(client: anyio.abc.SocketStream) -> None:
                async with client:
                    await relay_bus(client, bus)

            async with listener, anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, one)
                yield f"unix:path={relay}"
                tg.cancel_scope.cancel()
    finally:
        await pool.stop()


async def _run(argv: list[str]) -> str:
    with anyio.fail_after(30):
        done = await anyio.run_process(argv, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


@pytest.mark.timeout(90)
async def test_four_client_libraries_reach_the_bus_through_the_relay(tmp_path: Path) -> None:
    dest, path, iface = DBUS
    async with _relayed(tmp_path) as address:
        libdbus = ["dbus-send", f"--bus={address}", "--print-reply", f"--dest={dest}",
                   path, f"{iface}.ListNames"]  # fmt: skip
        gdbus = ["gdbus", "call", "--address", address, "--dest", dest, "--object-path", path,
                 "--method", f"{iface}.ListNames"]  # fmt: skip
        sd_bus = ["busctl", f"--address={address}", "call", dest, path, iface, "ListNames"]
        for argv in (libdbus, gdbus, sd_bus):
            assert REGISTRY in await _run(argv), argv
        # dbus-fast, AUTH EXTERNAL without an identity, then DATA
        auth = AuthExternal(uid=UID_NOT_SPECIFIED)
        bus = await MessageBus(bus_address=address, auth=auth).connect()
        try:
            assert bus.unique_name and bus.unique_name.startswith(":")
        finally:
            bus.disconnect()
        # dbus-fast alone treats the spec's ERROR to NEGOTIATE_UNIX_FD as fatal
        with pytest.raises(AuthError, match="ERROR"):
            await MessageBus(bus_address=address, negotiate_unix_fd=True).connect()


@pytest.mark.timeout(90)
async def test_a_client_that_begins_unauthenticated_is_cut_off(tmp_path: Path) -> None:
    async with _relayed(tmp_path) as address:
        with anyio.fail_after(20):
            async with await anyio.connect_unix(unix_path(address)) as client:
                await client.send(b"\0AUTH ANONYMOUS\r\n")
                assert await client.receive() == b"REJECTED EXTERNAL\r\n"
                await client.send(b"BEGIN\r\n")
                with pytest.raises(anyio.EndOfStream):  # closed
                    await client.receive()


def test_the_handshake_answers_each_command_in_each_state() -> None:
    guid = b"0123abcd"
    assert server_reply("auth", b"AUTH", guid) == ("auth", b"REJECTED EXTERNAL\r\n")
    assert server_reply("auth", b"AUTH EXTERNAL 30", guid) == ("ok", b"OK 0123abcd\r\n")
    assert server_reply("auth", b"AUTH EXTERNAL", guid) == ("data", b"DATA\r\n")
    assert server_reply("data", b"DATA", guid) == ("ok", b"OK 0123abcd\r\n")
    assert server_reply("data", b"CANCEL", guid) == ("auth", b"REJECTED EXTERNAL\r\n")
    assert server_reply("ok", b"NEGOTIATE_UNIX_FD", guid)[1].startswith(b"ERROR ")
    assert server_reply("ok", b"BEGIN", guid) == ("begun", b"")
    assert server_reply("ok", b"AUTH EXTERNAL 30", guid)[1].startswith(b"ERROR ")
    for state in ("auth", "data"):
        with pytest.raises(BusHandshakeError):
            server_reply(state, b"BEGIN", guid)


def test_a_bus_address_gives_its_socket_path_or_one_line_why_not() -> None:
    assert unix_path("unix:path=/tmp/a%20b/bus,guid=ff") == "/tmp/a b/bus"
    assert unix_path("unix:guid=ff,path=/x;tcp:host=h") == "/x"
    with pytest.raises(ValueError, match="not a unix:path= D-Bus address: 'unix:abstract=/x'"):
        unix_path("unix:abstract=/x")
