"""One display's processes: an Xvfb, its session bus and its accessibility bus.

Each is our direct child (none daemonizes: Xvfb never does, dbus-daemon runs with
``--nofork``), started from the event loop's thread with ``die_with_parent``, so the
kernel SIGKILLs it when the harness dies, however it dies. Each reports readiness on a
pipe (Xvfb's ``-displayfd``, dbus-daemon's ``--print-address``): no polling, and Xvfb
picks a free display number itself by binding its abstract socket, so concurrent pools
never race for one. Each runs in a session of its own: a terminal's Ctrl-C reaches only the harness,
which then stops them in order.

A display served over VNC (the remote_display substrate) runs TigerVNC's Xvnc in
Xvfb's place: one X server that is also the VNC server, so the framebuffer is never
copied and nothing polls it (x11vnc beside an Xvfb polls the screen, and costs a
second copy of it). It listens on a Unix socket in the display's own 0700 directory
only, never on TCP, with a password of its own each time it starts
(effectbench/displays/vnc.py puts an episode's endpoint on 127.0.0.1).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final

import anyio
import anyio.to_thread
import attrs

from effectbench.core.children import die_with_parent
from effectbench.core.errors import ConfigurationError
from effectbench.displays.tools import DisplayTools, vnc_tools

__all__ = ["Display", "DisplayServer", "DisplayStartError", "VncServer", "read_line"]

A11Y_BUS_VARIABLE: Final = "AT_SPI_BUS_ADDRESS"
"""Set for the programs on a display (never read from ours): where the a11y bus listens."""
NO_BRIDGE_VARIABLE: Final = "NO_AT_BRIDGE"
"""Set for the programs on a display without an accessibility bus: GTK then loads no
AT-SPI bridge (which would look for a bus on the session bus, and find none)."""
START_TIMEOUT_S: Final = 20.0
STOP_TIMEOUT_S: Final = 5.0
SOCKET_DIR_MAX: Final = 107 - len("/effectbench-display-12345678/accessibility")
X_SOCKETS: Final = Path("/tmp/.X11-unix")
BUS_CONFIG: Final = """<!DOCTYPE busconfig PUBLIC
 "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>{kind}</type>
  <listen>{listen}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
"""A bus with no service directories: nothing is activated on it behind the harness's
back (dbus-daemon's activation double-forks: an activated service would be nobody's
child, and would outlive a SIGKILLed harness), so every process of a display is one the
harness started. The accessibility bus's registry is started by the harness too."""


class DisplayStartError(ConfigurationError):
    """A display's Xvfb or bus failed to start; the message has its last words."""


PASSWORD_ALPHABET: Final = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
PASSWORD_LENGTH: Final = 8
"""VNC authentication uses the first 8 characters of a password (a DES key): 48 random
bits, new each time a display starts, so one episode's password opens no other's."""


@attrs.frozen
class VncServer:
    """Where a display's VNC server listens (a Unix socket only the harness can open)
    and the password it asks for."""

    socket: Path
    password: str = attrs.field(repr=False)


@attrs.frozen
class Display:
    """What an episode gets of its display: where X and both buses are."""

    number: int
    x_socket: Path
    session_bus: str
    a11y_bus: str | None
    """None where at-spi2-core is not installed, or the pool runs its displays without
    accessibility (a remote display: pixels only)."""
    vnc: VncServer | None = None
    """The display's VNC server; None unless the pool serves its displays over VNC."""

    @property
    def name(self) -> str:
        """The ``DISPLAY`` value, ``:<number>``."""
        return f":{self.number}"

    def environment(self) -> dict[str, str]:
        """The variables a client of this display runs with."""
        env = {"DISPLAY": self.name, "DBUS_SESSION_BUS_ADDRESS": self.session_bus}
        if self.a11y_bus is not None:
            env[A11Y_BUS_VARIABLE] = self.a11y_bus
        else:
            env[NO_BRIDGE_VARIABLE] = "1"
        return env


class DisplayServer:
    """One display, started and stopped as a whole; ``launch`` starts a client that
    dies with it. Every file it writes is under its own temporary directory."""

    def __init__(
        self,
        tools: DisplayTools,
        geometry: str,
        tmp_dir: Path | None,
        *,
        vnc: bool = False,
        accessibility: bool = True,
    ) -> None:
        self._tools = tools
        self._geometry = geometry
        self._vnc = vnc
        self._accessibility = accessibility and tools.registry is not None
        self._tmp_dir = tmp_dir
        self._dir: Path | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        """Xvfb first, then the buses: stopped in reverse."""
        self._clients: list[subprocess.Popen[bytes]] = []
        self.display: Display | None = None

    async def start(self) -> Display:
        if self.display is not None:
            raise RuntimeError("DisplayServer.start() called twice; call stop() first")
        self._dir = Path(tempfile.mkdtemp(prefix="effectbench-display-", dir=_short(self._tmp_dir)))
        try:
            self.display = await self._start_all(self._dir)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop()
            raise
        return self.display

    async def _start_all(self, directory: Path) -> Display:
        vnc = None
        if self._vnc:
            vnc = VncServer(directory / "vnc", _password())
            server = await self._xvnc(directory, vnc)
        else:
            server = [self._tools.xvfb, "-screen", "0", self._geometry]
        # The abstract socket (@/tmp/.X11-unix/X<n>, Xvfb's "local" transport) stays:
        # binding it is how -displayfd claims a number (the path socket is unlinked and
        # rebound by whoever asks; no lock file is written), so it is what keeps two
        # concurrent servers off the same display.
        # No GLX: it maps Mesa's drivers, 54 of a display's 68 MiB of RSS (docs/performance.md,
        # "Displays"), and neither GTK nor a VNC server needs OpenGL.
        server += ["-extension", "GLX", "-nolisten", "tcp", "-noreset", "-displayfd"]
        number = int(await self._started("Xvnc" if vnc else "Xvfb", server, directory, None))
        env = {"DISPLAY": f":{number}"}
        session = await self._bus("session", directory, env)
        env["DBUS_SESSION_BUS_ADDRESS"] = session  # never an autolaunched one
        a11y = None
        if self._accessibility and self._tools.registry is not None:
            a11y = await self._bus("accessibility", directory, env)
            registry_env = {**env, A11Y_BUS_VARIABLE: a11y}
            await self._start_registry(self._tools.registry, directory, registry_env)
            await self._publish_a11y(number, a11y)
        return Display(number, X_SOCKETS / f"X{number}", session, a11y, vnc)

    async def _xvnc(self, directory: Path, vnc: VncServer) -> list[str]:
        """Xvnc's command line (before the options it shares with Xvfb), its password
        file written: a Unix socket only (``-rfbport -1``: no TCP), mode 0600 in the
        display's 0700 directory, VNC authentication, every connection shared (so no
        client can push another off: the harness's camera and the arm both watch)."""
        xvnc, vncpasswd = vnc_tools(self._tools)
        width, height, depth = _geometry(self._geometry)
        secret = directory / "vnc.passwd"
        wrote = await anyio.run_process(
            [vncpasswd, "-f"], input=f"{vnc.password}\n{vnc.password}\n".encode(), check=False
        )
        if wrote.returncode != 0 or not wrote.stdout:
            raise DisplayStartError(f"vncpasswd -f failed: {wrote.stderr.decode().strip()}")
        secret.write_bytes(wrote.stdout)
        secret.chmod(0o600)
        return [
            xvnc, "-geometry", f"{width}x{height}", "-depth", str(depth),
            "-rfbport", "-1", "-rfbunixpath", str(vnc.socket), "-rfbunixmode", "0600",
            "-SecurityTypes", "VncAuth", "-PasswordFile", str(secret),
            "-AlwaysShared", "-desktop", "effectbench",
        ]  # fmt: skip

    async def _bus(self, kind: str, directory: Path, env: dict[str, str]) -> str:
        address = f"unix:path={directory / kind}"
        config = directory / f"{kind}.conf"
        config.write_text(BUS_CONFIG.format(kind=kind, listen=address))
        argv = [self._tools.dbus_daemon, f"--config-file={config}", "--nofork", "--print-address"]
        return await self._started(f"{kind}-bus", argv, directory, env)

    async def _start_registry(self, registry: Path, directory: Path, env: dict[str, str]) -> None:
        """at-spi2-registryd on the accessibility bus, ready once it owns its name."""
        with (directory / "registry.log").open("wb") as err:
            self._procs.append(_spawn([str(registry)], env, stderr=err))
        if self._tools.gdbus is None:
            return
        address = env[A11Y_BUS_VARIABLE].split(",")[0]
        wait = [self._tools.gdbus, "wait", f"--address={address}"]
        wait += ["--timeout", f"{START_TIMEOUT_S:g}", "org.a11y.atspi.Registry"]
        result = await anyio.run_process(wait, check=False)
        if result.returncode != 0:
            log = directory / "registry.log"
            raise DisplayStartError(f"at-spi2-registryd did not start{_last_words(log)}")

    async def _publish_a11y(self, number: int, address: str) -> None:
        """The root window's AT_SPI_BUS, where AT-SPI clients look when no variable
        names the bus (the server keeps it: ``-noreset``)."""
        if self._tools.xprop is None:
            return
        argv = [self._tools.xprop, "-display", f":{number}", "-root"]
        await anyio.run_process([*argv, "-f", "AT_SPI_BUS", "8s", "-set", "AT_SPI_BUS", address])

    async def _started(
        self, what: str, argv: Sequence[str], directory: Path, env: Mapping[str, str] | None
    ) -> str:
        """Start ``argv`` with the write end of a pipe as its last argument; the line
        it writes there once it is ready."""
        read_fd, write_fd = os.pipe()
        log = directory / f"{what}.log"
        try:
            with log.open("wb") as err:
                proc = _spawn([*argv, str(write_fd)], env or {}, stderr=err, keep=write_fd)
            self._procs.append(proc)
            os.close(write_fd)
            write_fd = -1
            return await read_line(read_fd, what, log)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)

    def launch(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, keep: int = -1
    ) -> subprocess.Popen[bytes]:
        """A client of this display (its variables set, its output discarded, the file
        descriptor ``keep`` left open in it), killed when the display is reset or stopped
        and when the harness dies. Call from the event loop's thread."""
        if self.display is None:
            raise RuntimeError("DisplayServer.launch() before start()")
        env = {**(env or {}), **self.display.environment()}
        proc = _spawn(argv, env, stderr=None, keep=keep)
        self._clients.append(proc)
        return proc

    async def stop(self) -> None:
        """Kill the clients, then stop the buses and Xvfb; safe to call twice."""
        clients, self._clients = self._clients, []
        procs, self._procs = self._procs, []
        self.display = None
        with anyio.CancelScope(shield=True):
            for proc in clients:
                await anyio.to_thread.run_sync(_end, proc, signal.SIGKILL)
            for proc in reversed(procs):
                await anyio.to_thread.run_sync(_end, proc, signal.SIGTERM)
        directory, self._dir = self._dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


def _spawn(
    argv: Sequence[str], env: Mapping[str, str], *, stderr: IO[bytes] | None, keep: int = -1
) -> subprocess.Popen[bytes]:
    """Our child, in a session of its own, SIGKILLed by the kernel when the harness dies
    (call from the event loop's thread: the one that lives as long as the child)."""
    return subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        pass_fds=(keep,) if keep >= 0 else (), env={**os.environ, **env},
        start_new_session=True,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - it only calls prctl (core/children.py)
    )  # fmt: skip


def _password() -> str:
    return "".join(secrets.choice(PASSWORD_ALPHABET) for _ in range(PASSWORD_LENGTH))


def _geometry(geometry: str) -> tuple[int, int, int]:
    """``WIDTHxHEIGHTxDEPTH`` (Xvfb's ``-screen`` form) as numbers."""
    try:
        width, height, depth = (int(part) for part in geometry.split("x"))
    except ValueError:
        raise ValueError(f"a display's geometry is WIDTHxHEIGHTxDEPTH, got {geometry!r}") from None
    return width, height, depth


def _short(tmp_dir: Path | None) -> Path | None:
    """``tmp_dir`` if the buses' sockets fit under it, else None (the system's temporary
    directory): a Unix socket's path is at most 107 bytes."""
    if tmp_dir is None or len(os.fsencode(tmp_dir)) > SOCKET_DIR_MAX:
        return None
    return tmp_dir


async def read_line(fd: int, what: str, log: Path | None = None) -> str:
    """The line a starting process writes on ``fd`` once it is ready (its log's last
    words in the error when it exits first or is not ready in time)."""
    os.set_blocking(fd, False)
    data = b""
    with anyio.move_on_after(START_TIMEOUT_S):
        while not data.endswith(b"\n"):
            await anyio.wait_readable(fd)
            chunk = os.read(fd, 4096)
            if not chunk:
                raise DisplayStartError(f"{what} exited before it was ready{_last_words(log)}")
            data += chunk
        return data.decode().strip()
    raise DisplayStartError(f"{what} was not ready within {START_TIMEOUT_S:g} s{_last_words(log)}")


def _last_words(log: Path | None) -> str:
    if log is None:
        return ""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f": {lines[-1].strip()}" if lines else ""


def _end(proc: subprocess.Popen[bytes], sig: int) -> None:
    """``sig``, then SIGKILL if it still runs after STOP_TIMEOUT_S; reaped either way."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
