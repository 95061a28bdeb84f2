"""Version-manager shims, resolved to the program they would run.

pyenv puts ``~/.pyenv/shims`` first on PATH; ``python3`` there is a bash script that
asks pyenv which interpreter applies and execs it. Inside the sandbox neither pyenv nor
its versions are mounted, so a contained ``exec:python3 agent.py`` failed with exit 127
("/root/.pyenv/libexec/pyenv: No such file or directory"). The harness asks pyenv once,
as the shim would (same environment and working directory), and runs that interpreter;
its install prefix is then mounted like any other program's (effectbench.agents.prefixes).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Final

__all__ = ["unshimmed"]

_PYENV_EXEC: Final = re.compile(
    r'^exec "(?P<pyenv>/[^"]*/libexec/pyenv)" exec "\$program"', re.MULTILINE
)
_SHIM_BYTES: Final = 4096
"""A shim is a short script; anything larger is not one."""


def unshimmed(program: str) -> str:
    """``program``, or the interpreter a pyenv shim at that path would exec. A shim
    pyenv cannot resolve (no such version) is returned as is: the agent then fails
    with pyenv's own message, as it would uncontained."""
    pyenv = _pyenv_of(Path(program))
    if pyenv is None:
        return program
    try:
        done = subprocess.run(
            [pyenv, "which", Path(program).name],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return program
    found = done.stdout.strip()
    return found if done.returncode == 0 and found.startswith("/") else program


def _pyenv_of(path: Path) -> str | None:
    """The pyenv a shim execs, or None when ``path`` is not a pyenv shim."""
    if path.parent.name != "shims":
        return None
    try:
        with path.open("rb") as f:
            head = f.read(_SHIM_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    match = _PYENV_EXEC.search(head) if head.startswith("#!") else None
    return match.group("pyenv") if match else None
