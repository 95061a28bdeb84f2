"""One agent process as the harness holds it, and how an episode on it can fail.

``Channel`` is the process's pipes, the episodes in flight on it (a ``Slot`` each) and
the tail of what it wrote on stderr: it splits stdout into lines, checks each against the
agent protocol, records actions and model calls into the episode's telemetry and ends the
episode with the agent's report or an ``AgentFailure``. ``ExecArm``
(``effectbench.agents.exec``, which re-exports the failures) starts and stops the
processes; this module never starts one.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections import deque
from typing import Any, Final

import anyio
import anyio.abc
import attrs
import orjson
import structlog

from effectbench.agents import protocol
from effectbench.agents.door import Door
from effectbench.agents.shots import Shots, TooManyWaiting
from effectbench.agents.starts import StartWatch
from effectbench.core.agentlog import LogBudgetExceeded
from effectbench.core.model import AgentReport
from effectbench.core.provider import Telemetry

log = structlog.get_logger("effectbench.agents")

MAX_LINE: Final = 1 << 20
MAX_ACTIONS: Final = 10_000
STDERR_TAIL: Final = 4_096
"""The bytes of an agent's stderr kept, all of which go into a failure's reason."""
EXIT_WAIT_S: Final = 2.0
"""How long after its stdout ended a process has to exit before its episodes fail
without an exit code (one that closed stdout and lives on)."""


class AgentFailure(Exception):
    """An episode the agent process failed; the scheduler records it as an ``agent`` failure."""


class AgentMalformed(AgentFailure):
    """A line that breaks the protocol (not JSON, wrong fields, too long, unknown episode)."""


class AgentOverBudget(AgentMalformed):
    """More bytes of actions and model calls than the episode's log budget allows."""


class AgentTimeout(AgentFailure):
    """No report by the episode's deadline."""


class AgentExited(AgentFailure):
    """The process ended (crashed or exited) before it reported."""


class AgentGaveUp(AgentFailure):
    """The agent sent an ``error`` message: it could not go on (like an arm that raises)."""


class AgentStartFailed(AgentFailure):
    """The process could not be started."""


@attrs.define
class Slot:
    """One episode in flight on a process."""

    telemetry: Telemetry
    done: anyio.Event = attrs.field(factory=anyio.Event)
    report: AgentReport | None = None
    error: AgentFailure | None = None
    actions: int = 0
    shots: Shots | None = None
    """The episode's screenshots (requests and ``--screenshots``), when it takes any."""

    def finish(self, report: AgentReport | None = None, error: AgentFailure | None = None) -> None:
        if self.done.is_set():
            return
        self.report, self.error = report, error
        self.done.set()


def _preview(line: bytes) -> str:
    text = line[:80].decode("utf-8", "replace")
    return repr(text + ("..." if len(line) > 80 else ""))


class Channel:
    """One agent process: its pipes, the episodes it holds, and what it said on stderr."""

    def __init__(
        self,
        proc: anyio.abc.Process,
        label: str,
        sole: str | None,
        watch: StartWatch,
        probe: anyio.Semaphore | None = None,
        *,
        supervised: bool = False,
    ) -> None:
        self.proc = proc
        self.supervised = supervised
        """Started under agents/supervisor.py, which kills the agent's whole tree."""
        self.door: Door | None = None
        """A contained agent in a network of its own: its way to its episodes' VNC ports."""
        self._probe = probe
        """Held while this is one of an unproven arm's first starts (released once it
        writes a line or ends)."""
        self.label = label
        self.sole = sole
        self.watch = watch
        self.spoke = False
        """Whether the process wrote a line on stdout (then it started, see agents/starts.py)."""
        self.killed = False
        """Whether the harness killed it (then how it ended says nothing of its start)."""
        """The one episode of a per-episode process: every stray line is its failure."""
        self.pending: dict[str, Slot] = {}
        self.alive = True
        self.stray = 0
        self._lock = anyio.Lock()
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_done = anyio.Event()

    async def send(self, line: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        async with self._lock:
            await stdin.send(line)

    def stderr_tail(self) -> str:
        """The last STDERR_TAIL bytes of stderr, its lines joined by `` | `` (blank ones
        dropped), as `` (stderr: ...)``; empty when the process wrote none."""
        raw = b"".join(self._stderr)[-STDERR_TAIL:]
        text = raw.decode("utf-8", "replace")
        lines = [" ".join(ln.split()) for ln in text.splitlines()]
        joined = " | ".join(ln for ln in lines if ln)
        return f" (stderr: {joined})" if joined else ""

    async def pump_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        try:
            async for chunk in stream:
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > STDERR_TAIL and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self._stderr_done.set()

    async def pump_stdout(self) -> None:
        """Split stdout into lines and dispatch them; at the end, fail what is left."""
        stream = self.proc.stdout
        assert stream is not None
        buf = bytearray()
        skipping = False
        try:
            async for chunk in stream:
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    if nl < 0:
                        if not skipping:
                            buf += chunk[start:]
                            if len(buf) > MAX_LINE:
                                buf.clear()
                                skipping = True
                                self._stray(f"a line longer than {MAX_LINE} bytes")
                        break
                    if skipping:
                        skipping = False
                    elif buf:
                        buf += chunk[start:nl]
                        self._line(bytes(buf))
                        buf.clear()
                    else:
                        self._line(chunk[start:nl])
                    start = nl + 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self.alive = False
        with anyio.move_on_after(EXIT_WAIT_S):  # stdout ends as a process exits: wait a little
            await self.proc.wait()
            await self._stderr_done.wait()  # its last words name the reason (e.g. bwrap's)
        code = self.proc.returncode
        if code is None:
            how = "closed its stdout"
        else:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        tail = self.stderr_tail()
        reason = f"the agent process {how} before it reported{tail}"
        # a process the harness did not end failed its episodes, or failed to start when
        # it never wrote a line: counted even when it died before it was sent an episode
        # (a shared process can), else a loaded machine lets an unstartable arm start more
        unstarted = not self.killed and not self.spoke
        failing = (bool(self.pending) and not self.killed) or unstarted
        self.fail_all(AgentExited(reason))
        if failing and tail and self.watch.show_stderr():
            log.warning("agent.stderr", arm=self.label, how=how, stderr=tail[10:-1])
        if unstarted and self.watch.failed(reason):
            say_stopped(self.label, self.watch)
        self.release_probe()

    def release_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.release()

    def fail_all(self, error: AgentFailure) -> None:
        for slot in list(self.pending.values()):
            slot.finish(error=error)

    def _stray(self, what: str) -> None:
        if self.sole is not None:
            slot = self.pending.get(self.sole)
            if slot is not None:
                kind = AgentMalformed
                slot.finish(error=kind(f"the agent wrote {what}"))
            return
        self.stray += 1
        if self.stray <= 3:
            log.warning("agent.stray_line", arm=self.label, what=what, dropped=self.stray)

    def _line(self, line: bytes) -> None:
        if not self.spoke:
            self.spoke = True
            self.watch.started()
            self.release_probe()
        if len(line) > MAX_LINE:
            self._stray(f"a line longer than {MAX_LINE} bytes")
            return
        if not line.strip():
            return
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            self._stray(f"a line that is not JSON: {_preview(line)}")
            return
        if not isinstance(msg, dict):
            self._stray(f"a JSON {type(msg).__name__} instead of a message object")
            return
        ep = msg.get("episode_id")
        slot = self.pending.get(ep) if isinstance(ep, str) else None
        if slot is None:
            self._stray(f"a {msg.get('type')!r} message for unknown episode {ep!r}")
            return
        self._deliver(slot, msg)

    def _deliver(self, slot: Slot, msg: dict[str, Any]) -> None:
        if slot.done.is_set():
            return
        why = protocol.problem(msg)
        if why is not None:
            slot.finish(error=AgentMalformed(f"the agent sent a malformed message: {why}"))
            return
        kind = msg["type"]
        if kind == "report":
            slot.finish(report=protocol.to_report(msg))
        elif kind == "error":
            what = " ".join(str(msg.get("message", "")).split())[:300] or "no reason given"
            slot.finish(error=AgentGaveUp(f"the agent gave up on the episode: {what}"))
        elif kind == "screenshot":
            self._screenshot(slot, msg)
        else:
            self._record(slot, kind, msg)
            if kind == "action" and slot.shots is not None and not slot.done.is_set():
                slot.shots.acted()

    @staticmethod
    def _screenshot(slot: Slot, msg: dict[str, Any]) -> None:
        """A ``screenshot`` request, answered in order by the episode's ``Shots``."""
        if slot.shots is None:
            slot.finish(error=AgentMalformed("the agent sent a screenshot request nobody serves"))
            return
        try:
            slot.shots.request(msg)
        except TooManyWaiting as exc:
            slot.finish(error=AgentMalformed(str(exc)))

    @staticmethod
    def _record(slot: Slot, kind: str, msg: dict[str, Any]) -> None:
        """An action or a model call into the episode's telemetry, within its limits."""
        try:
            if kind == "model_call":
                slot.telemetry.model_call(protocol.to_model_call(msg))
                return
            slot.actions += 1
            if slot.actions > MAX_ACTIONS:
                slot.finish(error=AgentMalformed(f"the agent sent more than {MAX_ACTIONS} actions"))
                return
            slot.telemetry.action(msg["kind"], **protocol.action_detail(msg))
        except LogBudgetExceeded as exc:
            slot.finish(error=AgentOverBudget(str(exc).replace("the arm", "the agent", 1)))

    def kill(self) -> None:
        """End the agent's processes: a supervised one's supervisor gets SIGTERM and kills
        the agent's whole tree (agents/supervisor.py); otherwise SIGKILL to the process
        group (a sandbox's processes die with it: bubblewrap's --die-with-parent and its
        PID namespace)."""
        self.alive = False
        self.killed = True
        if self.supervised:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            return
        self.force_kill()

    def force_kill(self) -> None:
        """SIGKILL the process group (a plain subprocess's children too)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone
        except PermissionError:
            # Only then the process itself: Popen.send_signal polls first, and a poll that
            # reaps the child races asyncio's child watcher (which then reports exit 255).
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


def say_stopped(label: str, watch: StartWatch) -> None:
    log.error(
        "agent.stopped",
        arm=label,
        starts=watch.limit,
        why="its agent process failed to start the same way each time; no further starts",
        reason=(watch.stopped or "").split(" (stderr: ")[0],
    )


def stopped_error(watch: StartWatch) -> AgentStartFailed:
    return AgentStartFailed(
        f"not started: the last {watch.limit} starts of the agent failed the same way: "
        f"{watch.stopped}"
    )


def outcome(slot: Slot) -> AgentReport:
    if slot.error is not None:
        raise slot.error
    assert slot.report is not None
    return slot.report
