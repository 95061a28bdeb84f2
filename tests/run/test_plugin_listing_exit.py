"""`effectbench providers` and `effectbench arms` exit 1 when a plugin failed to load,
and still list every other plugin: a script can tell a broken install from a good one."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from effectbench.testing import run_cli

BROKEN = 'raise ImportError("needs libfoo, which is not installed")\n'


def _fake_dist(site: Path, name: str, group: str, entry: str) -> None:
    """An installed distribution as pip leaves it: METADATA and entry_points.txt."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {entry}\n")


def _listing(command: str, site: Path | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return run_cli(command, cwd=cwd, env=env, timeout=60)


@pytest.mark.parametrize(
    ("command", "group", "healthy"),
    [
        ("providers", "effectbench.providers", "mockmed"),
        ("arms", "effectbench.arms", "screen_only"),
    ],
)
def test_a_broken_plugin_makes_the_listing_exit_1_and_the_rest_is_listed(
    tmp_path: Path, command: str, group: str, healthy: str
) -> None:
    clean = _listing(command, None, tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert clean.stderr == ""

    site = tmp_path / "site"
    site.mkdir()
    module = f"brokenplug_{uuid.uuid4().hex[:8]}"
    (site / f"{module}.py").write_text(BROKEN)
    _fake_dist(site, "brokenplug", group, f"{module}:Thing")
    proc = _listing(command, site, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert "failed" in rows["brokenplug"] and "needs libfoo" in rows["brokenplug"]
    assert "loaded" in rows[healthy]
    assert proc.stderr.strip() == "effectbench: 1 plugin(s) failed to load: brokenplug"
    assert "Traceback" not in proc.stderr
