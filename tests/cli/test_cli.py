"""The effectbench command: user errors are one line and exit 2; the happy paths work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import orjson
import pytest
from cli_env import TESTS, pythonpath_env

from effectbench.api import evaluate_provider
from effectbench.testing import (
    InMemoryProvider,
    ScriptedArm,
    effectbench_command,
    run_cli,
    untimed_run,
)

_cli = partial(run_cli, env=pythonpath_env(TESTS))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = evaluate_provider(
        [ScriptedArm()],
        InMemoryProvider(("ok", "phantom")),
        trials=2,
        out=tmp_path_factory.mktemp("small") / "run",
    )
    return run.run_dir


def _corrupt_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    log = dst / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"episode.', b'"episodX.', 1)
    log.write_bytes(b"".join(lines))
    return dst


USER_ERRORS = {
    "unknown provider": (["run", "--provider", "nope"], "unknown provider 'nope'"),
    "unknown arm": (["run", "--arm", "nope"], "unknown arm 'nope'"),
    "bad module ref": (["run", "--provider", "no_such_module_x:Thing"], "failed to load"),
    "glob selects nothing": (["run", "--task", "zzz*"], "selects no task"),
    "zero trials": (["run", "--trials", "0"], "--trials"),
    "negative concurrency": (["run", "--concurrency", "-3"], "--concurrency"),
    "non-integer trials": (["run", "--trials", "ten"], "ten"),
    "bad timeout": (["run", "--episode-timeout", "0"], "--episode-timeout"),
    "bad provider timeout": (["run", "--provider-timeout", "-1"], "--provider-timeout"),
    "huge trials": (["run", "--trials", "99999999999999999999"], "episodes"),
    "huge concurrency": (["run", "--concurrency", "99999999999999999999"], "--concurrency"),
    "resume an empty log": (["run", "--resume", "{empty}"], "stopped before it started"),
    "unwritable out": (["run", "--out", "{file}/sub"], "cannot create run directory"),
    "resume missing dir": (["run", "--resume", "{tmp}/nowhere"], "does not exist"),
    "resume corrupt log": (["run", "--resume", "{corrupt}"], "line 4"),
    "rescore missing dir": (["rescore", "{tmp}/nowhere"], "does not exist"),
    "rescore corrupt log": (["rescore", "{corrupt}"], "line 4"),
    "verify missing path": (["verify", "{tmp}/nowhere"], "does not exist"),
    "export unknown system": (
        ["export", "{small}", "--system", "nope", "--out", "{tmp}/s.json"],
        "not an arm",
    ),
    "export over a file": (
        ["export", "{small}", "--system", "scripted", "--out", "{file}"],
        "already exists",
    ),
    "out not empty": (["run", "--out", "{small}"], "--resume"),
    "unknown command": (["frobnicate"], "frobnicate"),
    "rescore the log file": (
        ["rescore", "{small}/events.jsonl"],
        "is the event log, not its run directory; give the directory: effectbench rescore {small}",
    ),
    "rescore a file": (["rescore", "{file}"], "is a file, not a run directory"),
    "resume a file": (["run", "--resume", "{file}"], "is a file, not a run directory"),
    "infinite provider timeout": (
        ["run", "--provider-timeout", "inf"],
        "--provider-timeout must be a finite",
    ),
    "infinite episode timeout": (
        ["run", "--episode-timeout", "inf"],
        "--episode-timeout must be a finite",
    ),
    "exec arm's program not on PATH": (
        ["run", "--arm", "exec-each:no-such-agent-effectbench --fast"],
        (
            "arm 'exec-each:no-such-agent-effectbench' cannot run: its program "
            "no-such-agent-effectbench was not found on PATH: install it, or give exec: its path"
        ),
    ),
    "export under a file": (
        ["export", "{small}", "--system", "scripted", "--out", "{file}/s.json"],
        "cannot write to {file}/s.json: a part of the path is a file, not a directory",
    ),
}


@pytest.mark.parametrize("case", sorted(USER_ERRORS))
def test_user_errors_are_one_line_and_exit_2(tmp_path: Path, small_run: Path, case: str) -> None:
    args, expected = USER_ERRORS[case]
    (tmp_path / "afile").write_text("x")
    corrupt = _corrupt_copy(small_run, tmp_path / "corrupt") if "{corrupt}" in args else tmp_path
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "events.jsonl").write_bytes(b"")  # killed before run.started
    before = (small_run / "events.jsonl").read_bytes()
    subs = {
        "{tmp}": str(tmp_path),
        "{file}": str(tmp_path / "afile"),
        "{corrupt}": str(corrupt),
        "{small}": str(small_run),
        "{empty}": str(tmp_path / "empty"),
    }
    argv = []
    for a in args:
        for k, v in subs.items():
            a = a.replace(k, v)
        argv.append(a)
    for k, v in subs.items():
        expected = expected.replace(k, v)
    proc = _cli(*argv, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0]
    assert "[Errno" not in lines[0]
    assert (small_run / "events.jsonl").read_bytes() == before, "recorded data changed"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_debug_shows_the_traceback_on_request(tmp_path: Path) -> None:
    proc = _cli("--debug", "run", "--provider", "no_such_module_x:Thing", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" in proc.stderr


def test_version_and_plugin_listings(tmp_path: Path) -> None:
    import effectbench

    proc = _cli("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"effectbench {effectbench.__version__}"
    proc = _cli("providers", cwd=tmp_path)
    assert proc.returncode == 0 and "mockmed" in proc.stdout and "loaded" in proc.stdout
    proc = _cli("arms", cwd=tmp_path)
    assert (
        proc.returncode == 0 and "screen_only" in proc.stdout and "effect_verified" in proc.stdout
    )


def test_version_imports_nothing_heavy() -> None:
    code = (
        "import sys, effectbench.cli.commands; print(sorted(m for m in "
        "('anyio','aiohttp','httpx','uvicorn','rich','jinja2','cattrs','structlog') if m in "
        "sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_run_with_plugin_refs_prints_headline_and_failures(tmp_path: Path) -> None:
    proc = _cli(
        "--log-format",
        "json",
        "run",
        "--provider",
        "effectbench.testing:every_mode",
        "--arm",
        "effectbench.testing:ScriptedArm",
        "--trials",
        "2",
        "--out",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    # 6 of 16 scored: the headline still prints, and the run is not a result
    assert proc.returncode == 3, proc.stderr
    assert "incomplete: arm 'scripted' coverage 37.5% (6/16 scored)" in proc.stderr
    assert "scripted: n=16 eligible=6" in proc.stdout
    assert (
        "environment 4" in proc.stdout
        and "skipped 2" in proc.stdout
        and "evaluation 4" in proc.stdout
    )
    for label in (
        "SWER",
        "wrong_write",
        "phantom",
        "over-halt",
        "task success",
        "screen success",
        "gap",
    ):
        assert label in proc.stdout
    assert f"run directory: {tmp_path / 'r'}" in proc.stdout
    plan = orjson.loads((tmp_path / "r" / "events.jsonl").read_bytes().splitlines()[0])["data"][
        "plan"
    ]
    assert plan["refs"] == {
        "provider": "effectbench.testing:every_mode",
        "arms": ["effectbench.testing:ScriptedArm"],
    }


def test_force_replaces_and_rescore_reproduces(tmp_path: Path, small_run: Path) -> None:
    target = tmp_path / "r"
    shutil.copytree(small_run, target)
    proc = _cli(
        "run",
        "--provider",
        "effectbench.testing:InMemoryProvider",
        "--arm",
        "effectbench.testing:ScriptedArm",
        "--trials",
        "1",
        "--out",
        str(target),
        "--force",
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    results, metrics = untimed_run(target)
    assert len(results) == 1

    (target / "metrics.json").unlink()
    (target / "results.jsonl").write_text("tampered\n")
    proc = _cli("rescore", str(target), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert untimed_run(target) == (results, metrics)


def test_verify_a_sound_run(tmp_path: Path, small_run: Path) -> None:
    proc = _cli("verify", str(small_run), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verify_lists_reasons_for_a_tampered_run(tmp_path: Path, small_run: Path) -> None:
    target = _corrupt_copy(small_run, tmp_path / "bad")
    proc = _cli("verify", str(target), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT sound" in proc.stdout and "Traceback" not in proc.stderr


def test_export_writes_a_submission_that_verify_accepts_and_a_relabel_it_rejects(
    tmp_path: Path, small_run: Path
) -> None:
    sub = tmp_path / "submission.json"
    proc = _cli("export", str(small_run), "--system", "scripted", "--out", str(sub), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _cli("verify", str(sub), cwd=tmp_path).returncode == 0
    doc = orjson.loads(sub.read_bytes())
    rows = doc["rows"]
    swer = [r for r in rows if r["outcome"] == "SILENT_WRONG_EFFECT"]
    assert swer, "the fake's phantom task must give the scripted arm a silent wrong effect"
    swer[0]["outcome"] = "SUCCESS"
    forged = tmp_path / "forged.json"
    forged.write_bytes(orjson.dumps(doc))
    proc = _cli("verify", str(forged), cwd=tmp_path)
    assert proc.returncode == 1 and "NOT sound" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.timeout(120)
def test_sigterm_stops_reference_gracefully_with_exit_143(tmp_path: Path) -> None:
    import signal
    import time

    from effectbench.log.reader import read_log, verify_log

    out = tmp_path / "ref"
    proc = subprocess.Popen(
        [*effectbench_command(), "reference", "--concurrency", "2", "--out", str(out), "-q"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = out / "events.jsonl"
    deadline = time.monotonic() + 60
    while not log.exists() or log.read_bytes().count(b"\n") < 40:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "run made no progress"
        time.sleep(0.001)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "nothing was checked" in stderr and "Traceback" not in stderr
    assert verify_log(log).ok
    last = list(read_log(log))[-1]
    assert last.type == "run.finished" and last.data["interrupted"] is True


def test_verify_checks_the_published_pack_fingerprint(tmp_path: Path, small_run: Path) -> None:
    """A re-chained log proves nothing about which pack ran; a published fingerprint does."""
    fingerprint = orjson.loads((small_run / "manifest.json").read_bytes())["pack_fingerprint"]
    assert (
        _cli("verify", str(small_run), "--pack-fingerprint", fingerprint, cwd=tmp_path).returncode
        == 0
    )
    other = "0" * 64
    proc = _cli("verify", str(small_run), "--pack-fingerprint", other, cwd=tmp_path)
    assert proc.returncode == 1 and f"is not the expected {other}" in proc.stdout, proc.stdout
    sub = tmp_path / "sub.json"
    assert (
        _cli(
            "export", str(small_run), "--system", "scripted", "--out", str(sub), cwd=tmp_path
        ).returncode
        == 0
    )
    assert _cli("verify", str(sub), "--pack-fingerprint", fingerprint, cwd=tmp_path).returncode == 0
    proc = _cli("verify", str(sub), "--pack-fingerprint", other, cwd=tmp_path)
    assert proc.returncode == 1 and f"is not the expected {other}" in proc.stdout, proc.stdout


# --------------------------------------------------------------------------- rough edges


def test_bare_command_prints_the_help_as_click_does(tmp_path: Path) -> None:
    proc = _cli(cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "Usage: effectbench [OPTIONS] COMMAND [ARGS]..."
    assert "Commands:" in lines and any(line.strip().startswith("rescore") for line in lines)
    assert "error:" not in proc.stderr


def test_python_dash_m_effectbench_is_the_command(tmp_path: Path) -> None:
    import effectbench

    proc = subprocess.run(
        [sys.executable, "-m", "effectbench", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"effectbench {effectbench.__version__}"
    proc = subprocess.run(
        [sys.executable, "-m", "effectbench", "rescore", str(tmp_path / "nowhere")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def _killed_copy(src: Path, dst: Path, keep: int, torn: bool) -> Path:
    """What a SIGKILL leaves: the first ``keep`` lines (and a torn piece of the next), no
    derived artifacts."""
    dst.mkdir()
    lines = (src / "events.jsonl").read_bytes().splitlines(keepends=True)
    (dst / "events.jsonl").write_bytes(b"".join(lines[:keep]) + (lines[keep][:30] if torn else b""))
    return dst


def test_verify_points_an_interrupted_run_at_resume_once(tmp_path: Path, small_run: Path) -> None:
    for torn in (False, True):
        run = _killed_copy(small_run, tmp_path / f"killed-{torn}", 12, torn)
        proc = _cli("verify", str(run), cwd=tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        reasons = [line for line in proc.stdout.splitlines() if line.startswith("  - ")]
        hint = f"effectbench run --resume {run}"
        assert sum(hint in r for r in reasons) == 1, reasons
        assert not any("missing" in r or "rescore after" in r for r in reasons), reasons
        assert "never built" in proc.stdout
        assert proc.stderr.count("event_log.torn_tail") == (1 if torn else 0), proc.stderr


def test_verify_reports_an_unreadable_line_once(tmp_path: Path, small_run: Path) -> None:
    run = tmp_path / "bad"
    shutil.copytree(small_run, run)
    lines = (run / "events.jsonl").read_bytes().splitlines(keepends=True)
    lines[5] = lines[5][:40] + b"\n"
    (run / "events.jsonl").write_bytes(b"".join(lines))
    proc = _cli("verify", str(run), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    mentions = [line for line in proc.stdout.splitlines() if "line 6:" in line]
    assert len(mentions) == 1 and "hash chain check failed" in mentions[0], proc.stdout


@pytest.mark.parametrize(
    "bad",
    [
        {"provider_timeout": float("inf")},
        {"provider_timeout": 0.0},
        {"episode_timeout": float("nan")},
        {"oracle_backoff": -1.0},
        {"oracle_backoff_max": float("inf")},
    ],
)
def test_time_limit_messages_name_no_internal_identifiers(bad: dict[str, float]) -> None:
    import re

    from effectbench.run.scheduler import SchedulerOptions

    with pytest.raises(ValueError) as caught:
        SchedulerOptions(**bad)
    message = str(caught.value)
    assert re.search(r"\b[a-z]+_[a-z_]+\b", message) is None, message
    assert "seconds" in message


def test_an_os_error_is_one_readable_line(capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    from effectbench.cli.commands import _report, os_error_line

    denied = PermissionError(errno.EACCES, "Permission denied", "/srv/runs/x")
    assert os_error_line(denied, "write to") == "cannot write to /srv/runs/x: permission denied"
    assert _report(denied, debug=False) == 2
    assert (
        capsys.readouterr().err
        == "effectbench: error: cannot access /srv/runs/x: permission denied\n"
    )
    full = OSError(errno.ENOSPC, "No space left on device")
    assert os_error_line(full) == "no space left on the device"


def test_an_exec_arm_whose_program_is_missing_is_refused_before_the_run_starts(
    tmp_path: Path,
) -> None:
    """Not a run that fails every episode at its start and ends incomplete (exit 3): a
    refusal, exit 2, with one line naming the program and what to do, and no run
    directory. A program that is there but cannot be executed is refused the same way."""
    out = tmp_path / "run"
    run = ("run", "--provider", "mockmed", "--trials", "1", "--out", str(out))
    proc = _cli(*run, "--arm", "exec:./no-such-agent", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    missing = (
        "effectbench: error: arm 'exec:no-such-agent' cannot run: its program ./no-such-agent "
        f"was not found ({tmp_path / 'no-such-agent'} does not exist): give exec: the path "
        "of an existing program, absolute or relative to the directory effectbench runs in"
    )
    assert proc.stderr.splitlines() == [missing]
    assert not out.exists() and list(tmp_path.iterdir()) == []

    (tmp_path / "agent.py").write_text("print('never run')\n")  # there, but not executable
    proc = _cli(*run, "--arm", "exec:./agent.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    not_executable = (
        "effectbench: error: arm 'exec:agent' cannot run: its program ./agent.py is not "
        "executable: make it so (chmod +x ./agent.py) or name its interpreter first "
        "(e.g. exec:python3 ./agent.py)"
    )
    assert proc.stderr.splitlines() == [not_executable]
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["agent.py"]


@pytest.mark.timeout(300)
def test_reference_and_audit_say_where_their_run_directory_is(tmp_path: Path) -> None:
    proc = _cli("reference", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (made,) = (tmp_path / "runs").iterdir()
    assert f"run directory: {made}" in proc.stdout.splitlines()
    proc = _cli("audit", "--provider", "example-notes", "--trials", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (audited,) = set((tmp_path / "runs").iterdir()) - {made}
    assert f"run directory: {audited}" in proc.stdout.splitlines()


@pytest.mark.timeout(300)
def test_make_dist_builds_both_wheels(tmp_path: Path) -> None:
    """Offline: hatchling comes from uv's cache, filled when `make setup` built the
    workspace."""
    import zipfile

    root = TESTS.parent
    assert (root / ".tools" / "bin" / "uv").exists(), "run `make setup` first"
    proc = subprocess.run(
        ["make", "--no-print-directory", "dist", f"DIST={tmp_path}"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "UV_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith((".whl", ".tar.gz")))
    assert names == [
        "effectbench-0.1.0-py3-none-any.whl",
        "effectbench-0.1.0.tar.gz",
        "effectbench_example_notes-0.1.0-py3-none-any.whl",
        "effectbench_example_notes-0.1.0.tar.gz",
        "effectbench_ihatemoney-0.1.0-py3-none-any.whl",
        "effectbench_ihatemoney-0.1.0.tar.gz",
        "effectbench_roundup-0.1.0-py3-none-any.whl",
        "effectbench_roundup-0.1.0.tar.gz",
    ]
    with zipfile.ZipFile(tmp_path / names[0]) as wheel:
        files = set(wheel.namelist())
        entry_points = wheel.read("effectbench-0.1.0.dist-info/entry_points.txt").decode()
    assert {"effectbench/__main__.py", "effectbench_mockmed/__init__.py"} <= files
    assert "effectbench = effectbench.cli:main" in entry_points
    assert "mockmed = effectbench_mockmed:MockMedProvider" in entry_points
