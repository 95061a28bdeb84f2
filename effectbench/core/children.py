"""Child processes that never outlive the harness, however it dies (SIGKILL included).

``die_with_parent`` is a ``preexec_fn``: the kernel SIGKILLs the child when the thread
that forked it ends (``PR_SET_PDEATHSIG``, Linux), so spawn long-lived children from the
event loop's thread, or from a thread that lives as long as the child (a blocking
``subprocess.run`` in a worker thread is fine: the thread waits for it). It must run
after any change of user (``subprocess``'s ``user=`` does it before ``preexec_fn``):
the kernel clears the setting when the credentials change.

``Warden`` covers a process that is not our child (a server a tool daemonized, such as
PostgreSQL under ``pg_ctl``): a small watcher process blocks on a pipe whose only
writer is the harness; when the harness dies the kernel closes that end, and the
watcher stops the process (the signal, then SIGKILL) if it is still the one it was
given (its command line still holds ``marker``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Final

__all__ = ["Warden", "die_with_parent"]

_PR_SET_PDEATHSIG: Final = 1
_LINUX: Final = sys.platform.startswith("linux")
_PRCTL: Final = ctypes.CDLL(None, use_errno=True).prctl if _LINUX else None
"""Resolved once in the parent: the child of a threaded process must not dlopen (it can
deadlock on a loader lock another thread held at fork), only call."""


def die_with_parent() -> None:
    """preexec_fn: ask the kernel to SIGKILL this child when its parent dies."""
    if _PRCTL is None:
        return
    if _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() == 1:  # the parent already died between fork and prctl
        os._exit(1)


_WATCH: Final = (
    "import os,signal,sys,time\n"
    "os.read(0, 1)\n"  # returns at EOF: the harness closed its end, or died
    "pid, sig, marker = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()\n"
    "def ours():\n"
    "    try:\n"
    "        return marker in open(f'/proc/{pid}/cmdline', 'rb').read()\n"
    "    except OSError:\n"
    "        return False\n"
    "if ours():\n"
    "    try:\n"
    "        os.kill(pid, sig)\n"
    "    except ProcessLookupError:\n"
    "        pass\n"
    "    end = time.monotonic() + 10\n"
    "    while ours() and time.monotonic() < end:\n"
    "        time.sleep(0.05)\n"
    "    if ours():\n"
    "        os.kill(pid, signal.SIGKILL)\n"
)


class Warden:
    """Stops process ``pid`` with ``sig`` once the harness is gone (or ``release``d
    while the process still runs)."""

    def __init__(self, pid: int, marker: str, sig: int = signal.SIGTERM) -> None:
        read_end, self._write_end = os.pipe()  # both close-on-exec: no other child holds them
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCH, str(pid), str(int(sig)), marker],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C must not end the watch early
            )
        finally:
            os.close(read_end)

    def release(self) -> None:
        """The process was stopped: let the watcher go (it stops what is left of it)."""
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1
            self._proc.wait()
