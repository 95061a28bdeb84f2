"""Which Chromium the harness launches: the headless shell first (a third of the full
browser's CPU per episode, docs/performance.md section 8), then the full browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectbench.browser import CHROMIUM_ENV, find_chromium


def _fake(directory: Path, name: str) -> Path:
    exe = directory / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def test_the_headless_shell_is_preferred_over_the_full_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CHROMIUM_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    full = _fake(tmp_path, "chromium")
    assert find_chromium() == str(full)
    shell = _fake(tmp_path, "chromium-headless-shell")
    assert find_chromium() == str(shell)
    monkeypatch.setenv(CHROMIUM_ENV, "chromium")  # an explicit choice still wins
    assert find_chromium() == str(full)
