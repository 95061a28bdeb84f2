"""ExecArm: an agent in any language, run as a child process that speaks the agent protocol.

Two modes. ``shared`` (the default): one long-lived process serves every episode of
the arm concurrently; messages carry the episode id, and the process is restarted for
later episodes if it dies. ``per_episode``: a fresh process per episode, killed once it
has reported (so nothing it does after its report reaches the product), which is also
the mode in which one episode's agent never sees another episode's channels.

Whatever goes wrong is that episode's ``agent`` failure, with the reason in the
exception's name and message: a malformed line, a message for an episode the process
was not given, a line over the size limit or too many actions (``AgentMalformed``), no
report by the deadline (``AgentTimeout``), the process exiting before it reported
(``AgentExited``), or not starting at all (``AgentStartFailed``). In shared mode a line
that names no episode it was given cannot be pinned on one episode: it is dropped and
counted (``stray_lines``), and the episodes it might have meant run into their deadline.
What happens on a process once it runs (its lines, its episodes, those failures) is
``effectbench.agents.channel``; this module starts, restarts and stops the processes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

import anyio
import anyio.abc
import orjson

from effectbench.agents import protocol, sandbox
from effectbench.agents.channel import (
    MAX_ACTIONS,
    MAX_LINE,
    STDERR_TAIL,
    AgentExited,
    AgentFailure,
    AgentGaveUp,
    AgentMalformed,
    AgentOverBudget,
    AgentStartFailed,
    AgentTimeout,
    Channel,
    Slot,
    outcome,
    say_stopped,
    stopped_error,
)
from effectbench.agents.door import Door, DoorError, walled
from effectbench.agents.sandbox import Containment
from effectbench.agents.shots import Shots
from effectbench.agents.starts import StartWatch
from effectbench.core.arm import TaskView
from effectbench.core.errors import ConfigurationError
from effectbench.core.model import AgentReport
from effectbench.core.provider import EnvHandle

Mode = Literal["shared", "per_episode"]
Execution = Literal["in_process", "subprocess", "isolated"]

EXEC_PREFIX: Final = "exec:"
EXEC_EACH_PREFIX: Final = "exec-each:"
"""``exec-each:<command line>``: the same, one process per episode."""
BROWSER_MARK: Final = "+browser"
"""``exec+browser:`` / ``exec-each+browser:``: the same, with a browser context per
episode whose CDP endpoint the ``episode`` message carries."""
_PREFIX_MODES: Final[dict[str, tuple[Mode, bool]]] = {
    EXEC_PREFIX: ("shared", False),
    EXEC_EACH_PREFIX: ("per_episode", False),
    f"exec{BROWSER_MARK}:": ("shared", True),
    f"exec-each{BROWSER_MARK}:": ("per_episode", True),
}
"""Each ``--arm`` prefix -> (process mode, browser wanted)."""
EXEC_PREFIXES: Final = tuple(_PREFIX_MODES)
"""Every ``--arm`` prefix that names a protocol agent by its command line."""
SUPERVISOR: Final = Path(__file__).with_name("supervisor.py")
_SUPERVISED: Final = sys.platform.startswith("linux")
"""Uncontained agents run under the supervisor where prctl's subreaper exists (Linux)."""
DEFAULT_TIMEOUT_S: Final = 300.0
_STOP_GRACE_S: Final = 5.0


class ContainmentUnavailable(ConfigurationError):
    """Isolation was required but this host cannot provide it; the message says why."""


ARM_NAME: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")
"""A name given with ``NAME=exec:...``: letters, digits and ``_ . + -``, at most 64."""


def split_arm_name(spec: str) -> tuple[str | None, str]:
    """``NAME=exec:...`` -> (NAME, ``exec:...``); a spec that starts with its prefix
    (an ``=`` in its command line included) -> (None, spec). ValueError for a name
    that is not an :data:`ARM_NAME`."""
    if spec.startswith(EXEC_PREFIXES):
        return None, spec
    name, sep, rest = spec.partition("=")
    if not sep or not rest.startswith(EXEC_PREFIXES):
        return None, spec
    if not ARM_NAME.fullmatch(name):
        raise ValueError(
            f"arm name {name!r} before '=' must be 1-64 letters, digits or _ . + - "
            "(e.g. --arm agent-a=exec:python a/agent.py)"
        )
    return name, rest


def _spec_name(argv: Sequence[str]) -> str:
    """``exec:<stem>`` of the last argument naming a file (else of the program)."""
    files = [a for a in argv[1:] if not a.startswith("-") and Path(a).is_file()]
    stem = Path(files[-1] if files else argv[0]).stem
    return f"{EXEC_PREFIX}{stem}"


def _code_version(argv: Sequence[str]) -> str:
    """What code the agent is: the command line and the bytes of every file it names,
    so a resume after the agent's script changed is refused (plan identity)."""
    digest = hashlib.sha256(orjson.dumps(list(argv)))
    for arg in argv:
        path = Path(arg)
        if not arg.startswith("-") and path.is_file():
            with contextlib.suppress(OSError):
                digest.update(path.read_bytes())
    return f"exec-sha256:{digest.hexdigest()[:16]}"


class ExecArm:
    """An out-of-process agent speaking the agent protocol (docs/agent-protocol.md).

    ``isolate``: None isolates when the host can (the default), True requires it
    (``ContainmentUnavailable`` otherwise), False runs a plain subprocess.
    ``timeout_s`` bounds an episode when the scheduler gives no ``--episode-timeout``.
    ``browser``: the harness opens a browser context per episode and sends its CDP
    endpoint in the ``episode`` message (docs/agent-protocol.md, "A browser").
    """

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        name: str | None = None,
        mode: Mode = "shared",
        isolate: bool | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        browser: bool = False,
    ) -> None:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("an exec arm needs a command line, e.g. exec:node agent.js")
        if mode not in ("shared", "per_episode"):
            raise ValueError(f"mode must be 'shared' or 'per_episode', got {mode!r}")
        self.argv: tuple[str, ...] = tuple(argv)
        self.name: str = name or _spec_name(argv)
        self.mode: Mode = mode
        self.isolate = isolate
        self.timeout_s = timeout_s
        self.env = dict(env or {})
        self.uses_browser_cdp: bool = browser
        """Ask the harness for a browser context and pass its CDP endpoint in ``episode``."""
        self.version: str = _code_version(argv)
        self._tg: anyio.abc.TaskGroup | None = None
        self._hide: tuple[str, ...] = ()
        self._shared: Channel | None = None
        self._walled: Channel | None = None
        """The long-lived process for remote_display and desktop episodes when contained:
        in a network of its own whose only ways out are its episodes' VNC ports and
        accessibility buses (agents/door.py)."""
        self._starting = anyio.Lock()
        self.stray_lines = 0
        self.processes_started = 0
        self.starts = StartWatch()
        """Failed starts in a row; past the limit the arm starts no more (agents/starts.py)."""
        self._probes = anyio.Semaphore(self.starts.limit)
        """How many processes may start before one of the arm's has written a line."""

    @classmethod
    def from_spec(cls, spec: str) -> ExecArm:
        """``exec:<command line>`` (one long-lived process) or ``exec-each:<command line>``
        (one process per episode), shell-style quoting, as given to ``--arm``; either
        prefix with ``+browser`` before its colon (``exec+browser:``) asks for a browser
        context per episode, as ``browser=True`` does. ``NAME=`` before any of them
        names the arm (``a=exec:python a/agent.py``; see :func:`split_arm_name`)."""
        given, spec = split_arm_name(spec)
        prefix = next((p for p in EXEC_PREFIXES if spec.startswith(p)), None)
        if prefix is None:
            raise ValueError(f"an exec arm starts with one of {', '.join(EXEC_PREFIXES)}")
        mode, browser = _PREFIX_MODES[prefix]
        argv = shlex.split(spec.removeprefix(prefix))
        name = prefix + _spec_name(argv).removeprefix(EXEC_PREFIX) if argv else None
        return cls(argv, name=given or name, mode=mode, browser=browser)

    def with_isolation(self, isolate: bool | None) -> ExecArm:
        """The same agent with another isolation choice (the run's ``--isolate``)."""
        clone = ExecArm(
            self.argv, name=self.name, mode=self.mode, isolate=isolate,
            timeout_s=self.timeout_s, env=self.env, browser=self.uses_browser_cdp,
        )  # fmt: skip
        clone.version = self.version
        return clone

    @property
    def containment(self) -> Containment | None:
        """The host's containment when isolation is wanted (None: not wanted)."""
        return None if self.isolate is False else sandbox.probe()

    @property
    def execution(self) -> Execution:
        """How this arm's episodes run, as the manifest records it."""
        c = self.containment
        if c is not None and c.available:
            return "isolated"
        if self.isolate is True:
            assert c is not None
            raise ContainmentUnavailable(f"--isolate: {c.reason}")
        return "subprocess"

    @property
    def execution_note(self) -> str | None:
        """Why a protocol agent that would be isolated is not, in one line."""
        c = self.containment
        return None if c is None or c.available else c.reason

    # ----------------------------------------------------------------- lifecycle

    @contextlib.asynccontextmanager
    async def lifespan(self, run_dir: Path | None = None) -> AsyncIterator[None]:
        """Around a run (the scheduler enters it): hosts the long-lived process and
        stops it at the end. ``run_dir`` is hidden from a sandbox that would see it."""
        self._hide = () if run_dir is None else (str(run_dir),)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                with anyio.CancelScope(shield=True):
                    await self._stop_shared()
                tg.cancel_scope.cancel()

    def command(self, door: Door | None = None) -> list[str]:
        """The command line actually started: wrapped in the sandbox when isolated (in a
        network of its own behind ``door``, if given), else (on Linux) in the supervisor
        that kills the agent's whole process tree with its episode or run, and with the
        harness (agents/supervisor.py)."""
        if self.execution == "isolated":
            c = self.containment
            assert c is not None
            network = None if door is None else door.network()
            return sandbox.wrap(c, self.argv, hide=self._hide, env=self.env, network=network)
        if _SUPERVISED:
            return [sys.executable, "-I", "-S", str(SUPERVISOR), str(os.getpid()), "--", *self.argv]
        return list(self.argv)

    def _unstartable(self, env: Mapping[str, str]) -> int | None:
        """Why the agent's program cannot be executed, as an errno (ENOENT: not there,
        EACCES: not executable), or None. Checked before a supervised start, where exec
        happens inside the supervisor, and by ``preflight``."""
        program = self.argv[0]
        if os.sep in program:
            if not os.path.exists(program):
                return errno.ENOENT
            return None if os.access(program, os.X_OK) else errno.EACCES
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        return None if found is not None else errno.ENOENT

    def preflight(self) -> None:
        """Called by the harness before a run writes anything: an agent whose program is
        not there, or cannot be executed, refuses the run in one line saying what to do,
        instead of failing every episode at its start."""
        code = self._unstartable({**os.environ, **self.env})
        if code is None:
            return
        program = self.argv[0]
        if code == errno.EACCES:
            raise ConfigurationError(
                f"its program {program} is not executable: make it so (chmod +x {program}) "
                f"or name its interpreter first (e.g. exec:python3 {program})"
            )
        if os.sep in program:
            raise ConfigurationError(
                f"its program {program} was not found ({os.path.abspath(program)} does not "
                "exist): give exec: the path of an existing program, absolute or relative "
                "to the directory effectbench runs in"
            )
        raise ConfigurationError(
            f"its program {program} was not found on PATH: install it, or give exec: its path"
        )

    def _walls(self, env: EnvHandle) -> bool:
        """Whether the episode's agent runs walled in (contained, on a remote_display or
        desktop episode): then it reaches its VNC port or accessibility bus and nothing
        else (agents/door.py)."""
        return self.execution == "isolated" and walled(env.channels)

    async def _spawn(
        self, sole: str | None, tg: anyio.abc.TaskGroup, *, walled: bool = False
    ) -> Channel:
        probe = None
        if not self.starts.proven:  # until a process writes a line, a few starts at a time
            await self._probes.acquire()
            probe = self._probes
            if self.starts.proven:
                probe.release()
                probe = None
        if self.starts.stopped is not None:
            if probe is not None:
                probe.release()
            raise stopped_error(self.starts)
        env = None if self.execution == "isolated" else {**os.environ, **self.env}
        supervised = env is not None and _SUPERVISED
        door = Door() if walled else None
        try:
            code = self._unstartable(env) if env is not None and supervised else None
            if code is not None:
                raise OSError(code, os.strerror(code))
            proc = await anyio.open_process(
                self.command(door),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
                pass_fds=() if door is None else door.pass_fds,
            )
        except OSError as exc:
            if door is not None:
                door.aclose()
            reason = f"cannot start the agent {shlex.join(self.argv)!r}: {exc.strerror or exc}"
            if self.starts.failed(reason):
                say_stopped(self.name, self.starts)
            if probe is not None:
                probe.release()
            raise AgentStartFailed(reason) from None
        self.processes_started += 1
        conn = Channel(proc, self.name, sole, self.starts, probe, supervised=supervised)
        if door is not None:
            door.started()
            conn.door = door
        tg.start_soon(conn.pump_stdout)
        tg.start_soon(conn.pump_stderr)
        return conn

    async def _shared_conn(self, *, walled: bool = False) -> Channel:
        async with self._starting:
            conn = self._walled if walled else self._shared
            if conn is None or not conn.alive:
                if conn is not None:
                    self.stray_lines += conn.stray
                    await self._reap(conn)
                assert self._tg is not None
                conn = await self._spawn(None, self._tg, walled=walled)
                if walled:
                    self._walled = conn
                else:
                    self._shared = conn
            return conn

    async def _stop_shared(self) -> None:
        conns = (self._shared, self._walled)
        self._shared = self._walled = None
        for conn in conns:
            if conn is not None:
                await self._stop_one(conn)

    async def _stop_one(self, conn: Channel) -> None:
        self.stray_lines += conn.stray
        conn.killed = True  # the harness ends it: how it exits says nothing of its start
        if conn.proc.stdin is not None:
            with contextlib.suppress(Exception):
                await conn.proc.stdin.aclose()  # end of input: a well-behaved agent exits
        with anyio.move_on_after(_STOP_GRACE_S):
            await conn.proc.wait()
        await self._reap(conn)

    async def _reap(self, conn: Channel) -> None:
        """Kill, wait for the exit and close the pipes (so no transport outlives the loop);
        a supervisor that has not ended its agent's tree within the grace is killed."""
        conn.kill()
        if conn.door is not None:
            conn.door.aclose()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(_STOP_GRACE_S), contextlib.suppress(Exception):
                await conn.proc.wait()
            if conn.proc.returncode is None:
                conn.force_kill()
            with anyio.move_on_after(_STOP_GRACE_S), contextlib.suppress(Exception):
                await conn.proc.aclose()

    # ----------------------------------------------------------------- one episode

    def _budget(self) -> float:
        """Seconds this episode may take: the arm's limit, or less when the scheduler's
        ``--episode-timeout`` ends sooner."""
        left = anyio.current_effective_deadline() - anyio.current_time()
        return max(0.0, min(self.timeout_s, left)) if math.isfinite(left) else self.timeout_s

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        if self.mode == "per_episode":
            return await self._run_own_process(task, env)
        if self._tg is None:
            raise RuntimeError(
                f"arm {self.name!r} runs a long-lived agent process: use it inside "
                "`async with arm.lifespan():` (the scheduler does this)"
            )
        conn = await self._shared_conn(walled=self._walls(env))
        slot = await self._exchange(conn, task, env, shared=True)
        await _final_shot(slot)
        return outcome(slot)

    async def _run_own_process(self, task: TaskView, env: EnvHandle) -> AgentReport:
        # Failures are raised after the task group: inside it they would be grouped.
        slot: Slot | AgentStartFailed
        async with anyio.create_task_group() as tg:
            try:
                conn = await self._spawn(task.episode_id, tg, walled=self._walls(env))
            except AgentStartFailed as exc:
                slot = exc
            else:
                try:
                    slot = await self._exchange(conn, task, env, shared=False)
                finally:
                    await self._reap(conn)
                    tg.cancel_scope.cancel()
        if isinstance(slot, AgentStartFailed):
            raise slot
        await _final_shot(slot)  # after the kill: nothing the agent does then reaches the page
        return outcome(slot)

    async def _exchange(
        self, conn: Channel, task: TaskView, env: EnvHandle, *, shared: bool
    ) -> Slot:
        ep = task.episode_id
        budget = self._budget()
        camera = env.browser_camera  # a page's, or a remote display's framebuffer
        policy = env.telemetry.screenshot_policy
        shots = Shots(ep, env.telemetry, camera, conn.send, policy)
        slot = conn.pending[ep] = Slot(env.telemetry, shots=shots)
        viewport = None if camera is None else camera.viewport
        try:
            async with anyio.create_task_group() as tg:
                shots.tg = tg
                with anyio.move_on_after(budget) as scope:
                    try:
                        channels: Mapping[str, str] = env.channels
                        if conn.door is not None:  # the ways out its channels name
                            channels = await conn.door.open(ep, channels, tg)
                        await conn.send(
                            protocol.episode_line(task, channels, budget, env.browser_cdp, viewport)
                        )
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        pass  # the process is gone; pump_stdout fails the slot with its exit
                    except DoorError as exc:
                        slot.finish(error=AgentExited(f"the agent's way out did not open: {exc}"))
                    await slot.done.wait()
                tg.cancel_scope.cancel()
            shots.tg = None
            if scope.cancelled_caught and not slot.done.is_set():
                slot.finish(error=AgentTimeout(f"the agent sent no report within {budget:g}s"))
        finally:
            if conn.door is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(_STOP_GRACE_S):
                    await conn.door.close(ep)
            del conn.pending[ep]
            if shared and slot.report is None and conn.alive:
                await self._cancel(conn, ep, slot)
            slot.finish(error=AgentTimeout("the episode was cancelled"))
        return slot

    async def _cancel(self, conn: Channel, ep: str, slot: Slot) -> None:
        reason = str(slot.error) if slot.error is not None else "the harness gave up on it"
        with anyio.move_on_after(1.0, shield=True):
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await conn.send(protocol.cancel_line(ep, reason))


async def _final_shot(slot: Slot) -> None:
    """The page when the agent reported (``--screenshots final`` and ``all``)."""
    if slot.report is not None and slot.shots is not None:
        await slot.shots.final()


__all__ = [
    "BROWSER_MARK",
    "DEFAULT_TIMEOUT_S",
    "EXEC_EACH_PREFIX",
    "EXEC_PREFIX",
    "EXEC_PREFIXES",
    "MAX_ACTIONS",
    "MAX_LINE",
    "STDERR_TAIL",
    "AgentExited",
    "AgentFailure",
    "AgentGaveUp",
    "AgentMalformed",
    "AgentOverBudget",
    "AgentStartFailed",
    "AgentTimeout",
    "ContainmentUnavailable",
    "ExecArm",
]
