"""A plugin the user installs into the checkout's environment survives the next `make`.

The test builds the environment exactly as `make setup` does, but into a temp directory
(`make VENV=<relative path>`, offline, from uv's cache), installs a throwaway provider
with the command the README documents, makes `make` sync again, and checks the provider
is still installed and listed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".tools" / "bin" / "uv"

PLUGIN_PYPROJECT = """\
[project]
name = "throwaway-plugin"
version = "0.0.1"
requires-python = ">=3.11"

[project.entry-points."effectbench.providers"]
throwaway = "throwaway_plugin:Provider"

[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"
"""

PLUGIN_MODULE = """\
class Provider:
    name = "throwaway"
    version = "0.0.1"

    def tasks(self):
        return ()

    async def start(self):
        pass

    async def stop(self):
        pass

    async def provision(self, task, trial, params):
        raise NotImplementedError
"""


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _make_setup(venv: Path, env: dict[str, str]) -> None:
    _run(["make", f"VENV={os.path.relpath(venv, ROOT)}", "setup"], env)
    assert (venv / ".synced").exists()


def test_make_setup_keeps_a_plugin_installed_with_the_documented_command(tmp_path: Path) -> None:
    env = {**os.environ, "UV_OFFLINE": "1"}
    env.pop("VIRTUAL_ENV", None)
    venv = tmp_path / "venv"
    _make_setup(venv, env)

    plugin = tmp_path / "throwaway"
    (plugin / "throwaway_plugin").mkdir(parents=True)
    (plugin / "pyproject.toml").write_text(PLUGIN_PYPROJECT)
    (plugin / "throwaway_plugin" / "__init__.py").write_text(PLUGIN_MODULE)
    # The README's command, with this test's environment in place of .venv.
    _run([str(UV), "pip", "install", "--python", str(venv / "bin" / "python"), str(plugin)], env)
    assert "throwaway" in _run([str(venv / "bin" / "effectbench"), "providers"], env).stdout

    (venv / ".synced").unlink()  # as after a pull that changed uv.lock: make syncs again
    _make_setup(venv, env)
    listing = _run([str(venv / "bin" / "effectbench"), "providers"], env).stdout
    rows = {line.split()[0]: line for line in listing.splitlines()[1:]}
    assert "loaded" in rows["throwaway"], listing
    assert "loaded" in rows["mockmed"], listing
