"""A contained agent keeps its own environment: a venv's packages (installed, ``.pth``
paths, editable finders), a console script's venv, ``node_modules`` and
``package.json`` above a Node.js script. Each program runs in the real sandbox and
prints the same as uncontained (on main the sandbox resolved the venv's ``python`` to
its base interpreter: ModuleNotFoundError)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import orjson
import pytest

from effectbench.agents.sandbox import probe, program_paths, wrap
from effectbench.core.exitcodes import ExitCode
from effectbench.core.rundir import RunDir
from effectbench.testing import run_cli

AGENT_PY = """\
import sys
import agentdep, agentsrc, flatpkg
print(agentdep.VALUE, agentsrc.VALUE, flatpkg.VALUE, sys.prefix == sys.base_prefix)
"""

FINDER = """\
import importlib.util
import sys

MAPPING: dict[str, str] = {"flatpkg": %r}


class _Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in MAPPING:
            return None
        where = MAPPING[name]
        return importlib.util.spec_from_file_location(
            name, where + "/__init__.py", submodule_search_locations=[where]
        )


def install():
    sys.meta_path.append(_Finder)
"""


def _venv(root: Path) -> Path:
    """A venv of this interpreter's base with three kinds of installed package: a module
    in site-packages, a source tree on a ``.pth`` line, an editable finder's mapping."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (site / "agentdep.py").write_text("VALUE = 'installed'\n")
    src = root / "checkout" / "src"
    src.mkdir(parents=True)
    (src / "agentsrc.py").write_text("VALUE = 'pth'\n")
    (site / "_agentsrc.pth").write_text(f"# an editable install\n{src}\n")
    flat = root / "flat" / "flatpkg"
    flat.mkdir(parents=True)
    (flat / "__init__.py").write_text("VALUE = 'finder'\n")
    (site / "__editable___flatpkg_finder.py").write_text(FINDER % str(flat))
    (site / "__editable__.flatpkg.pth").write_text(
        "import __editable___flatpkg_finder; __editable___flatpkg_finder.install()\n"
    )
    return venv


def _both(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], ...]:
    containment = probe()
    assert containment.available, containment.reason
    plain = subprocess.run(argv, capture_output=True, text=True, check=False, cwd="/")
    contained = subprocess.run(wrap(containment, argv), capture_output=True, text=True, check=False)
    return plain, contained


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    return _venv(tmp_path)


def test_a_venv_interpreter_keeps_its_packages_contained(tmp_path: Path, venv: Path) -> None:
    agent = tmp_path / "agent" / "agent.py"
    agent.parent.mkdir()
    agent.write_text(AGENT_PY)
    plain, contained = _both([str(venv / "bin" / "python"), str(agent)])
    assert plain.stdout == "installed pth finder False\n", plain.stderr
    assert (contained.returncode, contained.stdout) == (0, plain.stdout), contained.stderr


def test_a_venv_interpreter_named_after_env_and_a_console_script_work_too(
    tmp_path: Path, venv: Path
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT_PY)
    env = shutil.which("env")
    assert env is not None
    plain, contained = _both([env, str(venv / "bin" / "python"), str(agent)])
    assert plain.stdout == "installed pth finder False\n", plain.stderr
    assert (contained.returncode, contained.stdout) == (0, plain.stdout), contained.stderr

    script = venv / "bin" / "my-agent"  # what pip writes for a console_scripts entry point
    script.write_text(f"#!{venv / 'bin' / 'python'}\n{AGENT_PY}")
    script.chmod(0o755)
    plain, contained = _both([str(script)])
    assert plain.stdout == "installed pth finder False\n", plain.stderr
    assert (contained.returncode, contained.stdout) == (0, plain.stdout), contained.stderr


def test_node_modules_and_package_json_above_a_script_are_mounted(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "no node on this machine: `make test` installs Node.js (run it), or "
            "`apt-get install nodejs`"
        )
    project = tmp_path / "project"
    dep = project / "node_modules" / "leftpad"
    dep.mkdir(parents=True)
    (dep / "package.json").write_text('{"name": "leftpad", "main": "index.js"}')
    (dep / "index.js").write_text("module.exports = (s, n) => s.padStart(n, '.');\n")
    (project / "package.json").write_text('{"name": "agent", "type": "module"}')
    agent = project / "src" / "agent.js"
    agent.parent.mkdir()
    agent.write_text("import pad from 'leftpad';\nconsole.log(pad('ok', 5), typeof require);\n")
    paths = program_paths([node, str(agent)])
    assert str(project / "node_modules") in paths and str(project / "package.json") in paths
    plain, contained = _both([node, str(agent)])
    assert plain.stdout == "...ok undefined\n", plain.stderr  # an ES module: no require
    assert (contained.returncode, contained.stdout) == (0, plain.stdout), contained.stderr


def test_no_shared_directory_is_mounted_whole(tmp_path: Path) -> None:
    """A .pth line naming /tmp (or /) would have mounted the host's /tmp."""
    venv = _venv(tmp_path)
    site = next(venv.glob("lib*/python*/site-packages"))
    (site / "_wide.pth").write_text("/tmp\n/\n/usr/lib\n")
    paths = program_paths([str(venv / "bin" / "python"), "-c", "pass"])
    assert not {"/", "/tmp", "/usr/lib"} & set(paths)
    assert str(venv) in paths


PROTOCOL_AGENT = """\
import json, sys
import agentdep
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "episode":
        print(json.dumps({"type": "report", "episode_id": msg["episode_id"],
                          "reported_success": False, "halted": True,
                          "message": "agentdep " + agentdep.VALUE}), flush=True)
"""


@pytest.mark.timeout(240)
def test_an_isolated_run_of_a_venv_agent_scores_its_episodes(tmp_path: Path, venv: Path) -> None:
    agent = tmp_path / "proto" / "agent.py"
    agent.parent.mkdir()
    agent.write_text(PROTOCOL_AGENT)
    out = tmp_path / "run"
    proc = run_cli(
        "run", "--arm", f"exec:{venv / 'bin' / 'python'} {agent}", "--trials", "1",
        "--isolate", "--no-report", "--out", str(out), "-q",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == ExitCode.OK, proc.stderr
    root = RunDir(out)
    manifest = orjson.loads(root.manifest.read_bytes())
    assert manifest["execution"] == {"exec:agent": "isolated"}
    events = [orjson.loads(x) for x in root.log.read_bytes().splitlines()]
    reported = [e["data"]["message"] for e in events if e["type"] == "episode.reported"]
    assert reported == ["agentdep installed"] * 9
    assert not [e for e in events if e["type"] == "episode.failed"]
