"""A contained agent's only way out of its own network: its episodes' VNC ports and
accessibility buses.

An ``--isolate``d agent on a remote_display or desktop episode runs in a network
namespace of its own (``sandbox.Network``): no loopback port of the host (the product's
HTTP port, a browser's DevTools, any other service) and no abstract Unix socket (an X
server's, where a display listens besides its path socket) is reachable from there, and
the display's path sockets and buses are not mounted. What it may reach is relayed by
the harness through Unix sockets in one directory, mounted read-only in the sandbox at
``SOCKETS_IN_SANDBOX``, one socket per way out:

- a VNC port: the episode message still names ``127.0.0.1`` and the episode's port;
  inside the namespace a small door process (``DOOR``, standard-library Python, the
  sandbox's first program) listens on that port and forwards each connection to the
  socket named by the port, which the harness relays to the episode's VNC endpoint
  (displays/vnc.py). The harness opens a port before it sends the episode (``+PORT``
  on the door's control pipe, answered ``PORT`` once it listens) and closes it when
  the episode ends (``-PORT``);
- an accessibility bus: the episode message's ``desktop`` channel names the bus's
  socket in the sandbox (``unix:path=/run/effectbench-door/a11y-<n>``), which the
  harness relays to the display's bus, answering the D-Bus handshake itself
  (displays/bus_relay.py: the bus admits the harness's user only). The agent connects
  to the address its channel names, as it would uncontained; nothing else of the
  display (its X socket, its session bus) is reachable.

The door starts the agent as its child, passes on its exit status, and kills it when
the harness closes the control pipe.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Final

import anyio
import anyio.abc
import attrs

from effectbench.agents.sandbox import NOBODY, Network
from effectbench.displays.bus_relay import relay_bus, unix_path
from effectbench.displays.desktop import DesktopChannel
from effectbench.displays.vnc import MAX_CONNECTIONS, VncChannel, relay

__all__ = ["DOOR", "SOCKETS_IN_SANDBOX", "Door", "DoorError", "walled"]

SOCKETS_IN_SANDBOX: Final = "/run/effectbench-door"
OPEN_TIMEOUT_S: Final = 10.0
SYSTEM_PYTHON: Final = "/usr/bin/python3"

DOOR: Final = r"""
import os, selectors, signal, socket, sys
ctl_in, ctl_out, sockets, agent = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[5:]
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.set_wakeup_fd(wake_w)
child = os.fork()
if child == 0:
    for fd in (ctl_in, ctl_out, wake_r, wake_w):
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        os.execv(agent[0], agent)
    except OSError as exc:
        os.write(2, f"cannot start the agent {agent[0]!r}: {exc.strerror}\n".encode())
    os._exit(127)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
sel = selectors.DefaultSelector()
sel.register(ctl_in, selectors.EVENT_READ, "ctl")
sel.register(wake_r, selectors.EVENT_READ, "child")
listeners, peers, pending = {}, {}, b""

def close(sock):
    other = peers.pop(sock, None)
    for s in (sock, other):
        if s is not None:
            try:
                sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
            peers.pop(s, None)

def finish(status):
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)

while True:
    for key, _ in sel.select():
        what = key.data
        if what == "child":
            os.read(wake_r, 512)
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid == child:
                finish(status)
        elif what == "ctl":
            data = os.read(ctl_in, 4096)
            if not data:
                os.kill(child, signal.SIGKILL)
                finish(os.waitpid(child, 0)[1])
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                port = int(line[1:])
                if line.startswith(b"+") and port not in listeners:
                    lsock = socket.socket()
                    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    lsock.bind(("127.0.0.1", port))
                    lsock.listen(16)
                    listeners[port] = lsock
                    sel.register(lsock, selectors.EVENT_READ, ("listen", port))
                elif line.startswith(b"-") and port in listeners:
                    lsock = listeners.pop(port)
                    sel.unregister(lsock)
                    lsock.close()
                os.write(ctl_out, b"%d\n" % port)
        elif what[0] == "listen":
            conn, _ = key.fileobj.accept()
            out = socket.socket(socket.AF_UNIX)
            try:
                out.connect(os.path.join(sockets, str(what[1])))
            except OSError:
                conn.close()
                out.close()
                continue
            peers[conn], peers[out] = out, conn
            sel.register(conn, selectors.EVENT_READ, "pipe")
            sel.register(out, selectors.EVENT_READ, "pipe")
        else:
            sock = key.fileobj
            try:
                chunk = sock.recv(65536)
                if chunk:
                    peers[sock].sendall(chunk)
            except OSError:
                chunk = b""
            if not chunk:
                close(sock)
"""
"""The door, run as ``python3 -I -S -c DOOR CTL_IN CTL_OUT SOCKETS -- AGENT...``."""


class DoorError(Exception):
    """The door did not open an episode's way out (it died, did not answer, or the
    channel names no bus the harness can relay)."""


def walled(channels: Mapping[str, str]) -> bool:
    """Whether a contained agent runs an episode with these channels behind a door: a
    ``vnc`` or ``desktop`` channel, whose episode needs nothing of the host's network."""
    vnc = VncChannel.from_channels(channels)
    return vnc is not None or DesktopChannel.from_channels(channels) is not None


Handler = Callable[[anyio.abc.SocketStream], Awaitable[None]]


class Door:
    """The harness's side of one contained agent process's door: its control pipes,
    its socket directory, and a relay per way out (a VNC port, an accessibility bus)
    of each episode in flight."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="effectbench-door-"))
        self._dir.chmod(0o711)
        self._ctl_in_r, self._ctl_in_w = os.pipe()
        self._ctl_out_r, self._ctl_out_w = os.pipe()
        os.set_blocking(self._ctl_out_r, False)
        self._answers = b""
        self._relays: dict[str, anyio.CancelScope] = {}
        """Each socket's relay, by the socket's name."""
        self._episodes: dict[str, list[str]] = {}
        """The sockets opened for each episode in flight."""
        self._buses = itertools.count(1)
        self._lock = anyio.Lock()

    def network(self) -> Network:
        """The sandbox's network: the door first, its socket directory mounted."""
        python = SYSTEM_PYTHON if os.path.exists(SYSTEM_PYTHON) else sys.executable
        launcher = (python, "-I", "-S", "-c", DOOR, str(self._ctl_in_r), str(self._ctl_out_w))
        return Network(
            (*launcher, SOCKETS_IN_SANDBOX, "--"), ((str(self._dir), SOCKETS_IN_SANDBOX),)
        )

    @property
    def pass_fds(self) -> tuple[int, int]:
        """The pipe ends the sandboxed door keeps."""
        return self._ctl_in_r, self._ctl_out_w

    def started(self) -> None:
        """The process is running: close the ends only the door holds."""
        for fd in (self._ctl_in_r, self._ctl_out_w):
            os.close(fd)
        self._ctl_in_r = self._ctl_out_w = -1

    async def open(
        self, episode: str, channels: Mapping[str, str], tg: anyio.abc.TaskGroup
    ) -> dict[str, str]:
        """Let the agent reach what ``channels`` name (a VNC port, an accessibility
        bus) for ``episode``; returns once it can, with the channels as the agent sees
        them (a ``desktop`` channel's bus is its relay's socket in the sandbox)."""
        opened = self._episodes.setdefault(episode, [])
        seen = dict(channels)
        vnc = VncChannel.from_channels(channels)
        if vnc is not None:
            name = str(vnc.port)
            await self._serve(name, _to_vnc(vnc), tg)
            opened.append(name)
            await self._tell(b"+%d\n" % vnc.port, vnc.port)
        desktop = DesktopChannel.from_channels(channels)
        if desktop is not None:
            try:
                path = unix_path(desktop.a11y_bus)
            except ValueError as exc:
                raise DoorError(f"the desktop channel's bus cannot be relayed: {exc}") from None
            name = f"a11y-{next(self._buses)}"
            await self._serve(name, _to_bus(path), tg)
            opened.append(name)
            inside = f"unix:path={SOCKETS_IN_SANDBOX}/{name}"
            seen.update(attrs.evolve(desktop, a11y_bus=inside).channels())
        return seen

    async def _serve(self, name: str, handler: Handler, tg: anyio.abc.TaskGroup) -> None:
        """Relay each connection to the socket ``name`` with ``handler`` (at most
        MAX_CONNECTIONS at once: more are closed at once), until :meth:`close`."""
        path = self._dir / name
        try:
            listener = await anyio.create_unix_listener(path, mode=0o600)
        except OSError as exc:
            raise DoorError(f"cannot open the relay socket {path}: {exc.strerror}") from None
        if os.geteuid() == 0:
            os.chown(path, NOBODY, NOBODY)  # the agent runs as nobody
        scope = self._relays[name] = anyio.CancelScope()
        live = 0

        async def one(client: anyio.abc.SocketStream) -> None:
            nonlocal live
            async with client:
                if live >= MAX_CONNECTIONS:
                    return
                live += 1
                try:
                    await handler(client)
                finally:
                    live -= 1

        async def serve() -> None:
            with scope:
                async with listener:
                    await listener.serve(one)

        tg.start_soon(serve)

    async def close(self, episode: str) -> None:
        """The episode is over: its relays end, their sockets go, the door stops
        listening on its port."""
        for name in self._episodes.pop(episode, ()):
            scope = self._relays.pop(name, None)
            if scope is not None:
                scope.cancel()
            with contextlib.suppress(FileNotFoundError):
                (self._dir / name).unlink()
            if name.isdigit():
                with contextlib.suppress(DoorError):
                    await self._tell(b"-%s\n" % name.encode(), int(name))

    async def _tell(self, line: bytes, port: int) -> None:
        async with self._lock:
            try:
                os.write(self._ctl_in_w, line)
            except OSError:
                raise DoorError("the contained agent's door is gone") from None
            with anyio.move_on_after(OPEN_TIMEOUT_S):
                while b"\n" not in self._answers:
                    await anyio.wait_readable(self._ctl_out_r)
                    chunk = os.read(self._ctl_out_r, 4096)
                    if not chunk:
                        raise DoorError("the contained agent's door is gone")
                    self._answers += chunk
                answer, self._answers = self._answers.split(b"\n", 1)
                if answer != str(port).encode():
                    raise DoorError(f"the door answered {answer!r} for port {port}")
                return
            raise DoorError(f"the door did not open port {port} within {OPEN_TIMEOUT_S:g} s")

    def aclose(self) -> None:
        """Close the control pipe (the door kills its agent) and remove the sockets."""
        for scope in self._relays.values():
            scope.cancel()
        self._relays.clear()
        self._episodes.clear()
        for fd in (self._ctl_in_w, self._ctl_out_r, self._ctl_in_r, self._ctl_out_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._ctl_in_w = self._ctl_out_r = self._ctl_in_r = self._ctl_out_w = -1
        shutil.rmtree(self._dir, ignore_errors=True)


def _to_vnc(channel: VncChannel) -> Handler:
    async def handler(client: anyio.abc.SocketStream) -> None:
        await relay(client, lambda: anyio.connect_tcp(channel.host, channel.port))

    return handler


def _to_bus(path: str) -> Handler:
    async def handler(client: anyio.abc.SocketStream) -> None:
        await relay_bus(client, path)

    return handler
