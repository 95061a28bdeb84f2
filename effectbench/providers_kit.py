"""The served-provider skeleton: what a provider that runs a product repeats around it.

MockMed (and its PostgreSQL and diff variants), Roundup and the scaffold's template all
run a product for the harness, and did the same three things around their own code:

- ``start``: a fresh run directory (``effectbench.core.statedir.RunRoot``), what the
  product builds there once per run (a template database, a pristine tracker) and, for a
  product served from the harness's process, its ASGI app on a loopback socket
  (``effectbench.serve.LocalServer``); a failure on the way deletes the directory.
- ``provision``: an unguessable token per episode, the episode's URL on the shared
  server (``/e/<token>/``), its channels from the task's fixture (``episode_channels``),
  and the episode registered as live.
- ``stop``: every live episode torn down, then what the episodes shared (pooled HTTP
  connections), then the server, then the run directory.

``ServedRun`` is that skeleton, ``LiveEpisodes`` the registry of episodes not yet torn
down (so ``stop`` can end them), ``Released`` an episode whose teardown is one function,
``ProxiedEpisode`` one of a product run per episode behind its own fault proxy,
and ``RunGuard`` the guard around a provider's one run at a time (a second ``start``
refused, ``stop`` safe to repeat, ``provision`` before ``start`` refused), whatever the
run holds; ``CurrentRun`` is that guard around a bare ``ServedRun``.
``ProductProcess`` is a product served by a process of its own (Roundup's
``roundup-server``, the ``--product`` scaffold's server): its command line on a free
port, a readiness probe, death with the harness (``die_with_parent``) and a bounded stop.
docs/writing-a-provider.md ("The served-provider skeleton") shows it in use.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeAlias, TypeVar

import anyio
import anyio.to_thread

from effectbench.core.children import die_with_parent
from effectbench.core.listening import descendants, dying, listening_ports
from effectbench.core.provider import Alternatives
from effectbench.core.statedir import RunRoot
from effectbench.serve import LocalServer

if TYPE_CHECKING:
    import aiohttp

    from effectbench.core.model import TaskSpec
    from effectbench.faults import FaultProxy

__all__ = [
    "TOKEN_BYTES",
    "CurrentRun",
    "Episodic",
    "LiveEpisodes",
    "PortTaken",
    "ProductProcess",
    "ProxiedEpisode",
    "Released",
    "RunGuard",
    "ServedRun",
    "Stoppable",
    "Teardown",
    "episode_channels",
    "episode_token",
    "free_port",
    "fresh_copy",
    "installed_script",
    "run_setup",
]

TOKEN_BYTES: Final = 18
"""Random bytes of an episode's URL token (144 bits: no arm guesses another's)."""

Teardown: TypeAlias = Callable[[], Awaitable[None]]


class Episodic(Protocol):
    """A live episode: something whose teardown ends it (idempotent)."""

    async def teardown(self) -> None: ...


E = TypeVar("E", bound=Episodic)
R = TypeVar("R")


def episode_token() -> str:
    """A fresh, unguessable token naming one episode on a shared server."""
    return secrets.token_urlsafe(TOKEN_BYTES)


class Released:
    """An episode whose teardown is one coroutine function: run once, shielded from
    cancellation (a teardown cut short would leave its files behind)."""

    def __init__(self, release: Teardown) -> None:
        self._release = release
        self._done = False

    async def teardown(self) -> None:
        if self._done:
            return
        self._done = True
        with anyio.CancelScope(shield=True):
            await self._release()


class Stoppable(Protocol):
    """What an episode stops at its end: its fault proxy, its product's process."""

    async def stop(self) -> None: ...


P = TypeVar("P", bound=Stoppable)


class ProxiedEpisode(Released, Generic[P]):
    """One episode of a product run per episode behind a fault proxy of its own (Roundup,
    I Hate Money, the ``--product`` kit): ``proxy``, ``product`` (its process, or what
    holds it, such as Roundup's ``Tracker``), ``folder`` (the episode's files, when the
    product does not delete them itself) and ``session``, the HTTP session the provider
    opens for the episode's driver and readback (None until then).

    The teardown, once and shielded, closes the session, stops the proxy, stops the
    product and then deletes the folder; the proxy and the product are stopped even when
    a step before them raised."""

    def __init__(self, proxy: FaultProxy, product: P, folder: Path | None = None) -> None:
        self.proxy = proxy
        self.product = product
        self.folder = folder
        self.session: aiohttp.ClientSession | None = None
        super().__init__(self._end)

    async def _end(self) -> None:
        try:
            if self.session is not None:
                await self.session.close()
        finally:
            try:
                await self.proxy.stop()
            finally:
                await self.product.stop()
                if self.folder is not None:
                    folder = self.folder
                    await anyio.to_thread.run_sync(
                        lambda: shutil.rmtree(folder, ignore_errors=True)
                    )


class LiveEpisodes(Generic[E]):
    """A provider's episodes not yet torn down, so ``stop`` can end them."""

    def __init__(self) -> None:
        self._by_key: dict[Hashable, E] = {}

    def add(self, key: Hashable, episode: E) -> Teardown:
        """Register ``episode``; returns its teardown (which unregisters it first)."""
        self._by_key[key] = episode

        async def teardown() -> None:
            self._by_key.pop(key, None)
            await episode.teardown()

        return teardown

    def values(self) -> list[E]:
        return list(self._by_key.values())

    async def teardown_all(self) -> None:
        """Every episode still live, in the order they were provisioned."""
        live, self._by_key = list(self._by_key.values()), {}
        for episode in live:
            await episode.teardown()


class ServedRun(Generic[E]):
    """One start of a provider: its run directory (None for one that keeps nothing on
    disk), its product server (None for one that serves nothing from this process, such
    as Roundup's per-episode trackers) and its live episodes."""

    def __init__(self, root: Path | None, server: LocalServer | None) -> None:
        self.root = root
        self.server = server
        self.live: LiveEpisodes[E] = LiveEpisodes()

    @classmethod
    async def start(
        cls,
        files: RunRoot | None,
        *,
        prepare: Callable[[Path], Awaitable[None]] | None = None,
        app: Any = None,
        label: str = "HTTP server",
    ) -> ServedRun[E]:
        """Make the run directory, ``prepare(root)`` in it, then serve ``app`` (when
        given) on 127.0.0.1; on any failure the directory is deleted and the error raised."""
        root = files.make() if files is not None else None
        try:
            if prepare is not None:
                assert root is not None, "prepare needs a run directory (files)"
                await prepare(root)
            server = None
            if app is not None:
                server = LocalServer(app, label=label)
                await server.start()
        except BaseException:
            if root is not None:
                shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(root, server)

    @property
    def base_url(self) -> str:
        """The product server's root URL, ``http://127.0.0.1:<port>/``."""
        if self.server is None:
            raise RuntimeError("this run serves no product from the harness's process")
        return self.server.base_url

    def episode_url(self, token: str) -> str:
        """The URL of the episode named by ``token`` on the shared server."""
        return f"{self.base_url}e/{token}/"

    async def stop(self, *, before_server: Teardown | None = None) -> None:
        """Tear down every live episode, then ``before_server`` (shielded: what the
        episodes shared), then stop the server and delete the run directory, whatever
        fails first."""
        try:
            await self.live.teardown_all()
            if before_server is not None:
                with anyio.CancelScope(shield=True):
                    await before_server()
        finally:
            if self.server is not None:
                await self.server.stop()
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)


class RunGuard(Generic[R]):
    """A provider's run, one at a time, whatever the run holds: what ``start``, ``stop``
    and ``provision`` guard.

    ``owner`` names the provider in the errors (its class name). ``begin(open_run)``
    refuses a second start before the run ends, else awaits ``open_run()`` and holds what
    it returns (nothing, when it raises); ``end(close_run)`` lets go of the run and awaits
    ``close_run(run)``, and is a no-op without a run, so a second ``stop`` is safe;
    ``current()`` gives ``provision`` the run, or refuses when the provider was not
    started. ``run`` is None outside a run. ``CurrentRun`` is the guard of a bare
    ``ServedRun``; a provider whose run holds more (MockMed's template, pooled
    connections or PostgreSQL server) keeps it in one object and guards that."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self.run: R | None = None

    async def begin(self, open_run: Callable[[], Awaitable[R]]) -> R:
        """``open_run()``'s run, held until ``end``; a RuntimeError while one is held."""
        if self.run is not None:
            raise RuntimeError(f"{self._owner}.start() called twice; call stop() first")
        self.run = run = await open_run()
        return run

    async def end(self, close_run: Callable[[R], Awaitable[None]]) -> None:
        """Let go of the run, then ``close_run(run)``; nothing without a run (idempotent)."""
        run, self.run = self.run, None
        if run is not None:
            await close_run(run)

    def current(self) -> R:
        """The run, for ``provision``; a RuntimeError before ``start``."""
        run = self.run
        if run is None:
            raise self._not_started()
        return run

    def _not_started(self) -> RuntimeError:
        return RuntimeError(
            f"{self._owner}.provision() before start(): call await provider.start() first"
        )


class CurrentRun(RunGuard[ServedRun[E]]):
    """A provider's run, one at a time, when the run is a ``ServedRun``: ``RunGuard``
    with ``ServedRun``'s own start and stop.

    ``start`` refuses a second start before ``stop``; ``stop`` ends the run and is a
    no-op without one, so a second call is safe; ``started`` gives ``provision`` the run
    and its directory, or refuses when the provider was not started. ``run`` is None
    outside a run."""

    async def start(
        self,
        files: RunRoot | None,
        *,
        prepare: Callable[[Path], Awaitable[None]] | None = None,
        app: Any = None,
        label: str = "HTTP server",
    ) -> ServedRun[E]:
        """``ServedRun.start`` with these arguments, once until ``stop``."""

        async def open_run() -> ServedRun[E]:
            return await ServedRun.start(files, prepare=prepare, app=app, label=label)

        return await self.begin(open_run)

    async def stop(self, *, before_server: Teardown | None = None) -> None:
        """``ServedRun.stop`` of the run, if there is one; idempotent."""

        async def close_run(run: ServedRun[E]) -> None:
            await run.stop(before_server=before_server)

        await self.end(close_run)

    def started(self) -> tuple[ServedRun[E], Path]:
        """The run and its directory, for ``provision``; a RuntimeError before ``start``
        (or for a run started without a directory)."""
        run = self.current()
        if run.root is None:
            raise self._not_started()
        return run, run.root

    def live(self) -> list[E]:
        """The run's live episodes (none outside a run)."""
        return [] if self.run is None else self.run.live.values()


def episode_channels(task: TaskSpec, base_url: str) -> dict[str, str]:
    """An episode's channels from its task's fixture: ``base_url``, and the confusable
    records and valid values the task offers (the ``confusable`` and ``alternatives``
    fixture keys, JSON as ``Alternatives.channels()`` writes it; one empty or ``{}`` is
    left out)."""
    channels = {"base_url": base_url}
    for name in (Alternatives.RECORDS_CHANNEL, Alternatives.VALUES_CHANNEL):
        offered = task.fixture.get(name)
        if isinstance(offered, str) and offered not in ("", "{}"):
            channels[name] = offered
    return channels


def free_port() -> int:
    """A loopback port free this instant (not held: the product binds it itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PortTaken(Exception):
    """The product could not bind its port: another process took it after it was picked."""


class ProductProcess:
    """A product served by a process of its own, on 127.0.0.1.

    ``command(port)`` is its command line; ``ready_path`` the path (under its origin)
    that answers 200 once it serves; ``log`` where its stdout and stderr go;
    ``port_taken(log_tail)`` tells a lost port from another failure (a fresh port is then
    tried, and ``on_port`` told the new upstream). It is ready only when the answer came
    from its own socket: a 200 from whichever server took the port first (another
    episode's product, whose records the episode would then write) is a lost port too.
    The process is forked from the event loop's thread with ``die_with_parent``, so it
    dies with the harness, even by SIGKILL.
    """

    READY_TIMEOUT_S: Final = 240.0
    """Generous: on an overloaded machine a start can take a minute (the provider's
    provisioning time-out bounds the whole provision anyway)."""
    PROBE_TIMEOUT_S: Final = 5.0
    """Per probe: whoever holds a port we lost may accept and never answer."""
    STOP_TIMEOUT_S: Final = 5.0
    BIND_ATTEMPTS: Final = 3

    def __init__(
        self,
        command: Callable[[int], Sequence[str]],
        *,
        ready_path: str,
        log: Path,
        label: str,
        env: Mapping[str, str] | None = None,
        port_taken: Callable[[str], bool] = lambda tail: False,
    ) -> None:
        self._command = command
        self._ready_path = ready_path.lstrip("/")
        self._log = log
        self._label = label
        self._env = dict(env) if env is not None else None
        self._port_taken = port_taken
        self.port = free_port()
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def upstream(self) -> str:
        """The product's own origin, ``http://127.0.0.1:<port>/`` (the proxy forwards here)."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def gone(self) -> str | None:
        """Why the product's process no longer serves, or None while it runs (for
        ``ProvisionedEpisode.gone``)."""
        proc = self._proc
        if proc is None:
            return None
        code = proc.returncode
        if code is None:  # it may have exited and not been reaped yet: ask, leaving it be
            try:
                info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped this instant: its return code is on its way
                info = None
            else:
                if info is None and not dying(proc.pid):
                    return None
            if info is not None:
                killed = info.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
                code = -info.si_status if killed else info.si_status
        how = "" if code is None else f" (signal {-code})" if code < 0 else f" (status {code})"
        return f"the {self._label} (pid {proc.pid}) died{how}"

    async def start(self, on_port: Callable[[str], None] | None = None) -> None:
        """Spawn the product and wait until ``ready_path`` answers 200."""
        for attempt in range(self.BIND_ATTEMPTS):
            if attempt:
                self.port = free_port()
                if on_port is not None:
                    on_port(self.upstream)
            await self._spawn()
            try:
                await self._wait_ready()
                return
            except PortTaken:
                continue
        raise RuntimeError(
            f"the {self._label} found no free port in {self.BIND_ATTEMPTS} attempts: each "
            "time it could not bind its port, or its port answered from a process other than "
            "the one started (a product must serve from that process or a child of it, not "
            "a daemon it leaves behind)"
        )

    async def _spawn(self) -> None:
        log = self._log.open("wb")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self._command(self.port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self._env,
                preexec_fn=die_with_parent,
            )
        finally:
            log.close()

    async def _wait_ready(self) -> None:
        import aiohttp  # here, not at the top: listing providers must not pay ~100 ms for it

        proc = self._proc
        assert proc is not None
        url = self.upstream + self._ready_path
        deadline = anyio.current_time() + self.READY_TIMEOUT_S
        probe = aiohttp.ClientTimeout(total=self.PROBE_TIMEOUT_S)
        async with aiohttp.ClientSession(
            cookie_jar=aiohttp.DummyCookieJar(), timeout=probe, trust_env=False
        ) as session:
            while True:
                if proc.returncode is not None:
                    tail = self.log_tail()
                    if self._port_taken(tail):
                        raise PortTaken
                    raise RuntimeError(f"the {self._label} exited with {proc.returncode}: {tail}")
                try:
                    async with session.get(url, allow_redirects=False) as resp:
                        await resp.read()
                        answered = resp.status == 200
                except (aiohttp.ClientError, TimeoutError):
                    answered = False
                if answered:
                    if self._listens(proc.pid):
                        return
                    # another server holds the port this product was to bind: the answer
                    # was that server's, and this product can only fail to bind it
                    await self.stop()
                    raise PortTaken
                if anyio.current_time() > deadline:
                    raise RuntimeError(
                        f"the {self._label} was not ready after {self.READY_TIMEOUT_S:g}s: "
                        f"{self.log_tail()}"
                    )
                await anyio.sleep(0.02)

    def _listens(self, pid: int) -> bool:
        """Whether the product's process (or a child of it) listens on its port."""
        return self.port in listening_ports({pid, *descendants(pid)})

    def log_tail(self) -> str:
        """The last line of the product's log (what a failure message quotes)."""
        try:
            lines = self._log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no server log"
        return lines[-1] if lines else "empty server log"

    async def stop(self) -> None:
        """Terminate the process and wait for it (so its port is free); SIGKILL after
        ``STOP_TIMEOUT_S``. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.terminate()
            with anyio.move_on_after(self.STOP_TIMEOUT_S):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


def fresh_copy(pristine: Path, home: Path) -> None:
    """A fresh copy of the run's pristine environment for one episode (blocking: run it
    in a worker thread)."""
    shutil.copytree(pristine, home)


def installed_script(name: str, distribution: str) -> str:
    """A product's console script installed beside this interpreter (the venv's ``bin``),
    else on ``PATH``; missing, a one-line error naming the distribution to install."""
    here = Path(sys.executable).with_name(name)
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: install the {distribution} distribution")
    return found


def run_setup(
    args: Sequence[str], what: str, *, env: Mapping[str, str] | None = None, timeout: float = 120
) -> None:
    """Run one step of building a product's pristine environment (blocking: run it in a
    worker thread), dying with the harness; a failure raises with the output's last line."""
    proc = subprocess.run(
        list(args),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else dict(env),
        preexec_fn=die_with_parent,  # the blocked worker thread lives as long as the child
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {tail[0]}")
