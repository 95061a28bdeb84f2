"""Running a document's shell blocks as a reader would: each ```sh block in order, as
one bash script (so a heredoc that writes a file works), in a directory of the test's,
with this checkout's venv first on PATH. Shared by the tests of docs that promise
their commands run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def shell_blocks(doc: Path) -> list[str]:
    """The ```sh blocks of a Markdown file, in order."""
    return re.findall(r"^```sh\n(.*?)^```$", doc.read_text("utf-8"), re.DOTALL | re.MULTILINE)


def text_blocks(doc: Path) -> list[str]:
    """The ```text blocks (what a document says a command prints)."""
    return re.findall(r"^```text\n(.*?)^```$", doc.read_text("utf-8"), re.DOTALL | re.MULTILINE)


def run_block(block: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """One block under ``bash -euo pipefail``; its output is captured."""
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
