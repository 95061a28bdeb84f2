"""Displays served over VNC: the screen reaches a client with the episode's password
only, through a port that closes with the episode, and no VNC server outlives a
SIGKILLed harness (real Xvnc, real RFB over TCP on 127.0.0.1)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from processes import _comm, _descendants, _wait_until_gone

from effectbench.displays import DisplayPool, DisplaysUnavailable
from effectbench.displays.rfb import RfbError, open_rfb
from effectbench.displays.vnc import VncChannel, serve_vnc

pytestmark = pytest.mark.anyio

XVNC = "Xvnc"
"""TigerVNC's X server, as /proc names it."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _listening_tcp(pid: int) -> list[str]:
    """The TCP ports ``pid`` listens on (from /proc: its sockets' inodes)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.append(fields[1])
    return ports


async def test_the_screen_reaches_a_client_with_the_episodes_password_only() -> None:
    pool = DisplayPool(displays=1, vnc=True)
    await pool.start()
    try:
        async with pool.episode() as display:
            assert display.vnc is not None
            assert display.vnc.socket.stat().st_mode & 0o777 == 0o600
            xvnc = [p for p in _descendants(os.getpid()) if _comm(p) == XVNC]
            assert len(xvnc) == 1 and _listening_tcp(xvnc[0]) == []  # a Unix socket only
            async with serve_vnc(display) as channel:
                assert channel.host == "127.0.0.1" and channel.password == display.vnc.password
                assert VncChannel.from_channels(channel.channels()) == channel
                assert display.vnc.password not in repr(channel)
                async with open_rfb(channel.password, host=channel.host, port=channel.port) as rfb:
                    assert (rfb.width, rfb.height) == (1024, 720)
                    before = await rfb.capture()
                    pool.launch(display, ["xmessage", "-geometry", "+100+100", "on screen"])
                    after = None
                    with anyio.fail_after(30):
                        while after is None or after.pixels == before.pixels:
                            after = await rfb.changed(5.0)
                wrong = "x" if channel.password != "x" else "y"
                with pytest.raises(RfbError, match="authentication failed"):
                    async with open_rfb(wrong, host=channel.host, port=channel.port):
                        pass
                held = await anyio.connect_tcp(channel.host, channel.port)
                with anyio.fail_after(30):
                    assert await held.receive() == b"RFB 003.008\n"
            with pytest.raises(OSError):
                await anyio.connect_tcp(channel.host, channel.port)  # the port is closed
            with anyio.fail_after(30):
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    await held.receive()  # and the connection through it dropped
            await held.aclose()
            first = display.vnc.password
        async with pool.episode() as next_episode:
            assert next_episode.vnc is not None and next_episode.vnc.password != first
            with pytest.raises(RfbError, match="authentication failed"):
                async with open_rfb(first, path=next_episode.vnc.socket):
                    pass
    finally:
        await pool.stop()


HARNESS = """
import anyio
from effectbench.displays import DisplayPool
from effectbench.displays.vnc import serve_vnc

async def main():
    pool = DisplayPool(displays=2, vnc=True)
    await pool.start()
    async with pool.episode() as one, serve_vnc(one) as channel:
        pool.launch(one, ["xmessage", "kept"])
        print(channel.port, flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


@pytest.mark.timeout(120)
def test_a_killed_harness_leaves_no_vnc_server() -> None:
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout is not None
        port = int(harness.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            assert conn.recv(12) == b"RFB 003.008\n"
        tree = _descendants(harness.pid)
        names = sorted(_comm(pid) for pid in tree)
        assert names.count(XVNC) == 2 and names.count("xmessage") == 1, names
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        survivors = _wait_until_gone(tree)
        assert survivors == [], [(pid, _comm(pid)) for pid in survivors]
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=30)
    finally:
        harness.kill()
        harness.wait()
        if harness.stdout is not None:
            harness.stdout.close()


async def test_a_host_without_xvnc_gets_one_line_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for tool in ("Xvfb", "dbus-daemon"):
        found = shutil.which(tool)
        assert found is not None
        (tmp_path / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DisplaysUnavailable) as caught:
        await DisplayPool(displays=1, vnc=True).start()
    message = str(caught.value)
    assert "\n" not in message
    assert "apt-get install tigervnc-standalone-server tigervnc-tools" in message
