"""The fixed cost of a command: what it imports. `--help` of any command, a rescore and
a verify of a sound run load neither structlog (which pulls in rich) nor the scheduler;
`--help` not even the artifact code, anyio, cattrs or jinja2. Diagnostics still reach stderr in
the chosen format when something logs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from effectbench.api import evaluate_provider
from effectbench.cli.commands import cli
from effectbench.testing import InMemoryProvider, ScriptedArm

TESTS = Path(__file__).resolve().parents[1]
HEAVY = ("structlog", "rich", "effectbench.run.scheduler", "effectbench.api")
"""Never for a rescore or a verify of a sound run."""
NOT_FOR_HELP = (*HEAVY, "anyio", "cattrs", "jinja2", "effectbench.outputs.artifacts")
PROBE = """
import sys
from effectbench.cli.commands import main
rc = main(sys.argv[1:])
heavy = [m for m in {heavy} if m in sys.modules]
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
sys.exit(rc)
"""


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("imports") / "run"
    run = evaluate_provider([ScriptedArm()], InMemoryProvider(("ok", "phantom")), trials=2, out=out)
    return run.run_dir


def _probe(*args: str, cwd: Path, heavy: tuple[str, ...] = HEAVY) -> tuple[int, list[str], str]:
    """(exit code, heavy modules loaded, stderr without the probe's line)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=repr(heavy)), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    lines = proc.stderr.splitlines()
    probe = next(line for line in lines if line.startswith("HEAVY="))
    rest = "\n".join(line for line in lines if line != probe)
    return proc.returncode, [m for m in probe[6:].split(",") if m], rest


@pytest.mark.parametrize("command", ["", *sorted(cli.commands)])
def test_help_of_every_command_imports_nothing_heavy(command: str, tmp_path: Path) -> None:
    args = [command, "--help"] if command else ["--help"]
    rc, heavy, err = _probe(*args, cwd=tmp_path, heavy=NOT_FOR_HELP)
    assert rc == 0, err
    assert heavy == []


@pytest.mark.parametrize("command", ["rescore", "verify"])
def test_rescore_and_verify_of_a_sound_run_import_nothing_heavy(
    command: str, small_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    extra = ["--no-report"] if command == "rescore" else []
    rc, heavy, err = _probe(command, *extra, str(run), cwd=tmp_path)
    assert rc == 0, err
    assert heavy == []


def test_a_warning_still_reaches_stderr_in_the_chosen_format(
    small_run: Path, tmp_path: Path
) -> None:
    """structlog is configured the moment something imports it: a torn tail found by a
    rescore is one JSON line on stderr, nothing on stdout."""
    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    with open(run / "events.jsonl", "ab") as f:
        f.write(b'{"v":1,"seq":')
    proc = subprocess.run(
        [sys.executable, "-m", "effectbench", "--log-format", "json", "rescore"]
        + ["--allow-incomplete", "--no-report", str(run)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    logged = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert [e["event"] for e in logged] == ["event_log.torn_tail"]
    assert logged[0]["level"] == "warning"
    assert "torn_tail" not in proc.stdout


def _loads(module: str) -> list[str]:
    """The effectbench modules a fresh interpreter has loaded after ``import module``."""
    code = (
        f"import sys, {module}; "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'effectbench')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return proc.stdout.split()


def test_a_package_init_loads_nothing_but_its_own_facade() -> None:
    """The old names of effectbench.cli and effectbench.log load only when asked for:
    importing the CLI's structlog set-up loads 6 effectbench modules (19 when
    cli/__init__ re-exported the commands), the log's line check no reader."""
    assert _loads("effectbench.cli.logsetup") == [
        "effectbench",
        "effectbench.cli",
        "effectbench.cli.logsetup",
        "effectbench.core",
        "effectbench.core.relocated",
        "effectbench.core.versions",
    ]
    assert "effectbench.log.reader" not in _loads("effectbench.log.lines")
    assert "effectbench.audit.checks" not in _loads("effectbench.audit.attest")
    assert "effectbench.projections.episodes" not in _loads("effectbench.scoring.judge")
