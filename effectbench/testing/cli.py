"""Running the real ``effectbench`` command from a test, as a user would, with the
interpreter the tests run under: end-to-end tests of a plugin then exercise its
entry points, the CLI's messages and its exit codes, not only the Python API."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

__all__ = ["effectbench_command", "run_cli"]


def effectbench_command() -> list[str]:
    """The argv prefix that runs ``effectbench`` from this interpreter's environment: the
    console script beside ``sys.executable`` (a virtualenv's ``bin/``), else
    ``python -m effectbench``. For a ``subprocess.Popen`` a test must signal or kill."""
    script = os.path.join(os.path.dirname(sys.executable), "effectbench")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "effectbench"]


def run_cli(
    *args: str,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``effectbench *args`` to the end and return it with ``stdout`` and ``stderr``
    as text. A non-zero exit is returned, not raised (check ``returncode``; a test of a
    refusal wants it), but a command still running after ``timeout`` seconds raises
    ``subprocess.TimeoutExpired``, so a hang fails the test instead of stalling it.
    ``env`` is the whole environment, as for ``subprocess.run`` (None: this process's)."""
    return subprocess.run(
        [*effectbench_command(), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
