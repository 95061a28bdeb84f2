"""The supervisor of an uncontained agent process: it dies with the harness, and the
agent's whole process tree dies with it.

Run as ``python -I -S supervisor.py <harness pid> -- <agent argv...>`` (standard library
only, no effectbench import, so it starts in milliseconds). It marks itself a child
subreaper (``PR_SET_CHILD_SUBREAPER``), so every process the agent starts that is
orphaned, a daemon that double-forked into a session of its own included, becomes its
child instead of init's; asks for SIGTERM when the harness dies
(``PR_SET_PDEATHSIG``); and starts the agent in a session of its own, on the same
stdin, stdout and stderr (its own copies go to /dev/null, so the harness sees the end
of the agent's output when the agent's processes are gone).

When the agent's first process exits, or on SIGTERM, SIGINT or SIGHUP (the harness
ending the episode, or dying), it kills every process below it with SIGKILL, reaps
them, and exits as the agent did: with its exit code, or by the same signal. What it
cannot do is outlive a SIGKILL of its own: an agent that kills its supervisor (it runs
as the same user) can leave processes behind. That is containment's job (``--isolate``:
a PID namespace, where everything dies with the sandbox).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _descendants(root: int) -> list[int]:
    """Every process below ``root``, from /proc (a process that exits while being read
    is skipped)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def _reap_ready(agent: int, status: list[int]) -> bool:
    """Reap every child that has exited; True when one was the agent (its status saved)."""
    seen = False
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return seen
        if pid == 0:
            return seen
        if pid == agent:
            status.append(code)
            seen = True


def _children_left(agent: int, status: list[int]) -> bool:
    """Reap what has exited; whether any child is still running."""
    _reap_ready(agent, status)
    try:
        return os.waitpid(-1, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


def _kill_tree(agent: int, status: list[int]) -> None:
    """SIGKILL the agent's process group, then every process still below this one until
    none is left: orphans of the killed are reparented here (the subreaper), so a later
    pass finds them. With no child left there is nothing below, and /proc is not read."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(agent, signal.SIGKILL)  # its session's group: the agent and what stayed in it
    me = os.getpid()
    while _children_left(agent, status):
        for pid in _descendants(me):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            pid, code = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        if pid == agent:
            status.append(code)


def _start(argv: list[str], me: int) -> int:
    """Fork the agent into its own session; exec failures come back through a pipe."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the agent, until exec
        try:
            os.close(read_end)
            os.setsid()
            for sig in _STOP:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != me:
                os._exit(1)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(write_end, (exc.strerror or str(exc)).encode("utf-8", "replace"))
        finally:
            os._exit(127)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        failure = pipe.read()
    if failure:
        os.waitpid(pid, 0)
        message = f"cannot start the agent {argv[0]!r}: {failure.decode('utf-8', 'replace')}\n"
        os.write(2, message.encode())
        os._exit(127)
    return pid


def _exit_as(code: int) -> None:
    """Exit with the agent's status: its exit code, or death by the same signal (with
    no core file of this process)."""
    if os.WIFSIGNALED(code):
        sig = os.WTERMSIG(code)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default is to go on (e.g. SIGCHLD)
    os._exit(os.waitstatus_to_exitcode(code) if os.WIFEXITED(code) else 1)


def main() -> None:
    harness, argv = int(sys.argv[1]), sys.argv[3:]
    libc = ctypes.CDLL(None)
    waited = {signal.SIGCHLD, *_STOP}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)  # received by sigwaitinfo only
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != harness:  # the harness died before prctl
        os._exit(1)
    agent = _start(argv, os.getpid())
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    status: list[int] = []
    while not _reap_ready(agent, status):
        if signal.sigwaitinfo(waited).si_signo != signal.SIGCHLD:
            break  # the harness ends the episode, or died
    _kill_tree(agent, status)
    _exit_as(status[0] if status else signal.SIGKILL)


if __name__ == "__main__":
    main()
