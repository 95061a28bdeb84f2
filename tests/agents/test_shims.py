"""A pyenv shim as a contained agent's interpreter (``exec:python3 agent.py`` where
``python3`` is ``~/.pyenv/shims/python3``) runs the interpreter pyenv picks: inside the
sandbox the shim's pyenv is not mounted (it failed with exit 127)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from effectbench.agents.prefixes import absolute_argv
from effectbench.agents.sandbox import probe, wrap
from effectbench.agents.shims import unshimmed

REAL = str(Path(sys.executable).resolve())


def _pyenv(root: Path, answer: str, code: int = 0) -> Path:
    """A pyenv root with a shim ``python3`` whose pyenv answers ``which`` with ``answer``."""
    (root / "libexec").mkdir(parents=True)
    (root / "shims").mkdir()
    pyenv = root / "libexec" / "pyenv"
    pyenv.write_text(f'#!/bin/sh\n[ "$1" = which ] && echo "{answer}"; exit {code}\n')
    shim = root / "shims" / "python3"
    shim.write_text(
        '#!/usr/bin/env bash\nset -e\nprogram="${0##*/}"\n'
        f'export PYENV_ROOT="{root}"\nexec "{pyenv}" exec "$program" "$@"\n'
    )
    for f in (pyenv, shim):
        f.chmod(0o755)
    return shim


def test_a_shim_is_resolved_to_the_interpreter_pyenv_names(tmp_path: Path) -> None:
    shim = _pyenv(tmp_path / "pyenv", REAL)
    assert unshimmed(str(shim)) == REAL
    assert absolute_argv([str(shim), "-c", "pass"])[0] == REAL


def test_anything_else_is_left_alone(tmp_path: Path) -> None:
    failing = _pyenv(tmp_path / "broken", "pyenv: version `9.9' is not installed", code=1)
    assert unshimmed(str(failing)) == str(failing)  # the agent then fails with pyenv's words
    plain = tmp_path / "shims" / "tool"
    plain.parent.mkdir()
    plain.write_text("#!/bin/sh\nexec /usr/bin/true\n")
    assert unshimmed(str(plain)) == str(plain)
    assert unshimmed(sys.executable) == sys.executable


def test_a_contained_agent_started_through_a_shim_runs(tmp_path: Path) -> None:
    shim = _pyenv(tmp_path / "pyenv", REAL)
    containment = probe()
    assert containment.available, containment.reason
    out = subprocess.run(
        wrap(containment, [str(shim), "-c", "import sys; print(sys.version_info[0])"]),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (out.returncode, out.stdout) == (0, "3\n"), out.stderr
