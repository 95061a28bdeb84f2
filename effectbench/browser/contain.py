"""Chromium contained as strictly as the agents that drive it.

Every Chromium the harness starts (the pool's, through Playwright, and the CDP hub's,
over a pipe) runs inside the agents' bubblewrap sandbox (``effectbench.agents.sandbox``,
profile ``BROWSER``) as uid 65534 (nobody), when the host can contain agents at all:
the system's programs read-only, a few files of ``/etc`` (fonts, Debian's launcher
settings), and private, empty tmpfs mounts for its scratch (``/tmp``, where its profile
lives) and its ``/dev/shm``. Nothing else of the host is mounted: no run directory, no
state root, no ``/dev/shm`` or ``/tmp`` of the host, no venv, no home. Its own sandbox
stays off (``--no-sandbox``): inside bubblewrap it has no root to shed.

Where the host cannot contain (no bubblewrap, no namespaces), the browser runs as
before, and so do the agents: no arm of such a run is recorded ``isolated``.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs

from effectbench.agents import sandbox
from effectbench.agents.sandbox import Containment

PROFILE_DIR: Final = "/tmp/profile"
"""The CDP hub's Chromium profile, inside the sandbox's private ``/tmp``."""
_PROFILE_SLOT: Final = "@profile@"
_LAUNCH: Final = (
    "import ctypes,json,os,sys\n"
    "ctypes.CDLL(None).prctl(1, 9)\n"  # PR_SET_PDEATHSIG, SIGKILL
    "if os.getppid() != int(sys.argv[1]): os._exit(1)\n"  # the parent died before prctl
    "argv = json.loads(sys.argv[2]) + sys.argv[3:]\n"
    "profile = [a.split('=', 1)[1] for a in sys.argv[3:] if a.startswith('--user-data-dir=')]\n"
    f"slot = argv.index({_PROFILE_SLOT!r})\n"
    f"argv[slot] = profile[0] if profile else {PROFILE_DIR!r}\n"
    "os.execv(argv[0], argv)\n"
)
"""Playwright's launcher: PR_SET_PDEATHSIG, then the sandbox, with the profile
directory Playwright chose (``--user-data-dir=``) mounted as a private tmpfs."""


@attrs.frozen
class BrowserSandbox:
    """How this process starts Chromium: inside ``containment``, or plainly when None."""

    containment: Containment | None

    @property
    def contained(self) -> bool:
        return self.containment is not None

    def argv(
        self, executable: str, args: Sequence[str], *, scratch: Sequence[str] = ()
    ) -> list[str]:
        """The command line that runs ``executable args`` (contained when it can be);
        ``scratch``: more private, writable directories inside the sandbox."""
        if self.containment is None:
            return [executable, *args]
        return sandbox.sandbox_argv(
            self.containment, [executable, *args], profile=sandbox.BROWSER, scratch=scratch
        )

    def launcher(self, directory: Path, executable: str) -> str:
        """An executable for Playwright's ``executable_path``: it runs ``executable``
        with whatever arguments Playwright passes, inside the sandbox, dying with its
        parent (the driver). Only contained sandboxes have one."""
        assert self.containment is not None
        head = self.argv(executable, (), scratch=(_PROFILE_SLOT,))
        script = directory / f"{Path(executable).name}-contained"
        script.write_text(
            "#!/bin/sh\n"
            f"exec {shlex.quote(sys.executable)} -I -S -c {shlex.quote(_LAUNCH)} "
            f'"$PPID" {shlex.quote(json.dumps(head))} "$@"\n'
        )
        script.chmod(0o700)
        return str(script)


def browser_sandbox() -> BrowserSandbox:
    """Contained whenever this host can contain agents (``sandbox.probe()``)."""
    found = sandbox.probe()
    return BrowserSandbox(found if found.available else None)


__all__ = ["PROFILE_DIR", "BrowserSandbox", "browser_sandbox"]
