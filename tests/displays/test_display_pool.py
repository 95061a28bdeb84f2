"""The harness's displays: distinct, usable, reset between episodes, and gone with
``stop()`` or with a harness that is SIGKILLed (real Xvfb and dbus-daemon)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from processes import _comm, _descendants, _wait_until_gone

from effectbench.displays import Display, DisplayPool, DisplaysUnavailable

pytestmark = pytest.mark.anyio

DISPLAY_PROCESSES = ("Xvfb", "dbus-daemon", "at-spi2-registr", "xprop")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _ping(bus: str, dest: str = "org.freedesktop.DBus", path: str = "/") -> None:
    """A round trip on ``bus`` (activating ``dest`` where its bus can)."""
    subprocess.run(
        ["dbus-send", f"--bus={bus}", "--print-reply", f"--dest={dest}", path,
         "org.freedesktop.DBus.Peer.Ping"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip


def _ours() -> dict[int, int]:
    return {p: t for p, t in _descendants(os.getpid()).items() if _comm(p) in DISPLAY_PROCESSES}


async def test_a_pool_of_two_lends_distinct_working_displays() -> None:
    pool = DisplayPool(displays=2)
    await pool.start()
    try:
        async with pool.episode() as one, pool.episode() as two:
            assert one.number != two.number
            assert len({one.session_bus, two.session_bus, one.a11y_bus, two.a11y_bus}) == 4
            for display in (one, two):
                assert display.x_socket.is_socket()
                info = await anyio.to_thread.run_sync(_xdpyinfo, display)
                assert f"name of display:    {display.name}" in info
                assert "1024x720 pixels" in info
                await anyio.to_thread.run_sync(_ping, display.session_bus)
                assert display.a11y_bus is not None
                await anyio.to_thread.run_sync(_ping, display.a11y_bus)
    finally:
        await pool.stop()


async def test_a_reset_kills_the_clients_and_clears_the_display() -> None:
    pool = DisplayPool(displays=1)
    await pool.start()
    try:
        async with pool.episode() as display:
            launched = pool.launch(display, ["sleep", "600"])
            watcher = await anyio.to_thread.run_sync(_watch_root, display)
            await anyio.to_thread.run_sync(_set_root_property, display, "LEFT_BEHIND")
            assert "LEFT_BEHIND" in await anyio.to_thread.run_sync(_root_properties, display)
        assert await anyio.to_thread.run_sync(_exit_status, launched) == -signal.SIGKILL
        assert await anyio.to_thread.run_sync(_exit_status, watcher) != 0  # lost its display
        async with pool.episode() as after:
            assert "LEFT_BEHIND" not in await anyio.to_thread.run_sync(_root_properties, after)
            assert after.session_bus != display.session_bus
    finally:
        await pool.stop()


async def test_a_pool_without_accessibility_runs_no_a11y_bus_or_registry() -> None:
    """A pixels-only display (remote_display's): its X server and session bus, and no
    accessibility bus or registry; its clients are told to load no AT-SPI bridge."""
    pool = DisplayPool(displays=1, accessibility=False)
    await pool.start()
    try:
        async with pool.episode() as display:
            assert display.a11y_bus is None
            assert sorted(_comm(p) for p in _ours()) == ["Xvfb", "dbus-daemon"]
            await anyio.to_thread.run_sync(_ping, display.session_bus)
            assert display.environment()["NO_AT_BRIDGE"] == "1"
            assert "AT_SPI_BUS" not in await anyio.to_thread.run_sync(_root_properties, display)
    finally:
        await pool.stop()


def _xdpyinfo(display: Display) -> str:
    return subprocess.run(
        ["xdpyinfo"], env={**os.environ, **display.environment()},
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip


def _watch_root(display: Display) -> subprocess.Popen[bytes]:
    """A client the harness did not launch, connected once it has printed the root's
    properties."""
    env = {**os.environ, **display.environment()}
    watcher = subprocess.Popen(["xprop", "-root", "-spy"], env=env, stdout=subprocess.PIPE)
    assert watcher.stdout is not None and watcher.stdout.readline()
    return watcher


def _exit_status(proc: subprocess.Popen[bytes]) -> int:
    status = proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()
    return status


def _set_root_property(display: Display, name: str) -> None:
    subprocess.run(
        ["xprop", "-display", display.name, "-root", "-f", name, "8s", "-set", name, "x"],
        check=True, timeout=30,
    )  # fmt: skip


def _root_properties(display: Display) -> str:
    return subprocess.run(
        ["xprop", "-display", display.name, "-root"],
        check=True, capture_output=True, text=True, timeout=30,
    ).stdout  # fmt: skip


async def test_stop_leaves_no_process_socket_or_file() -> None:
    pool = DisplayPool(displays=2)
    await pool.start()
    async with pool.episode() as display:
        pool.launch(display, ["xprop", "-root", "-spy"])
        assert display.a11y_bus is not None
        registry = ("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root")
        await anyio.to_thread.run_sync(_ping, display.a11y_bus, *registry)
        running = _ours()
        assert sorted(_comm(p) for p in running).count("Xvfb") == 2
        assert "at-spi2-registr" in {_comm(p) for p in running}
        socket_inode = display.x_socket.stat().st_ino
        await pool.stop()
    assert _wait_until_gone(running) == []
    # the number is free again, so another process's server may already hold it (CI's
    # other worker, a second pool): only our socket must be gone
    assert not display.x_socket.exists() or display.x_socket.stat().st_ino != socket_inode
    assert not Path(display.session_bus.split("=", 1)[1].split(",")[0]).parent.exists()


HARNESS = """
import anyio, subprocess, sys
from effectbench.displays import DisplayPool

async def main():
    pool = DisplayPool(displays=2)
    await pool.start()
    async with pool.episode() as one, pool.episode() as two:
        for display in (one, two):
            pool.launch(display, ["xprop", "-root", "-spy"])
            subprocess.run(["dbus-send", f"--bus={display.a11y_bus}", "--print-reply",
                            "--dest=org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root",
                            "org.freedesktop.DBus.Peer.Ping"], check=True, capture_output=True)
        print("ready", flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


@pytest.mark.timeout(120)
def test_a_killed_harness_leaves_no_display_process() -> None:
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout is not None
        assert harness.stdout.readline() == "ready\n"
        tree = _descendants(harness.pid)
        names = sorted(_comm(pid) for pid in tree)
        assert names.count("Xvfb") == 2 and names.count("dbus-daemon") == 4, names
        assert names.count("xprop") == 2 and names.count("at-spi2-registr") == 2, names
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        survivors = _wait_until_gone(tree)
        assert survivors == [], [(pid, _comm(pid)) for pid in survivors]
    finally:
        harness.kill()
        harness.wait()
        if harness.stdout is not None:
            harness.stdout.close()


async def test_a_host_without_xvfb_gets_one_line_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    pool = DisplayPool(displays=1)
    with pytest.raises(DisplaysUnavailable) as caught:
        await pool.start()
    message = str(caught.value)
    assert "\n" not in message
    assert "Xvfb and dbus-daemon" in message and "apt-get install xvfb dbus" in message
    assert _ours() == {}
