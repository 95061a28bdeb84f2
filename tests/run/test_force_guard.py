"""--force replaces only an effectbench run directory that no live run holds, and a run
whose directory is replaced under it fails instead of reporting another run's results."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from cli_env import TESTS, pythonpath_env

# The CLI subprocess imports plugins from this test module itself.
HERE = Path(__file__).resolve().parent

from effectbench.api import RunError, evaluate_provider
from effectbench.core.arm import TaskView
from effectbench.core.model import AgentReport
from effectbench.core.provider import EnvHandle
from effectbench.log.reader import write_events_sync
from effectbench.run.outdir import RUN_FILES, prepare_out_dir
from effectbench.testing import (
    InMemoryProvider,
    ScriptedArm,
    effectbench_command,
    run_cli,
    untimed_run,
)

GATE_ENV = "EFFECTBENCH_TEST_GATE"
DEADLINE = 60.0


class GateArm:
    """Halts once the file named by $EFFECTBENCH_TEST_GATE exists: holds a subprocess
    run open (and its lock taken) for exactly as long as a test needs."""

    name = "gated"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        gate = Path(os.environ[GATE_ENV])
        with anyio.fail_after(DEADLINE):
            while not gate.exists():
                await anyio.sleep(0.01)
        return AgentReport(reported_success=False, halted=True, message="gate opened")


_cli = partial(run_cli, env=pythonpath_env(TESTS, HERE))


FAKE_RUN = (
    "run",
    "--provider",
    "effectbench.testing:InMemoryProvider",
    "--arm",
    "effectbench.testing:ScriptedArm",
    "--trials",
    "1",
    "-q",
)


def _one_line_refusal(proc: subprocess.CompletedProcess[str], expected: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "n=" not in proc.stdout


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("guard") / "run"
    return evaluate_provider(
        [ScriptedArm()], InMemoryProvider(("ok", "phantom")), trials=2, out=out
    ).run_dir


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# --- what is not a run directory ---------------------------------------------------------


def _users_folder(d: Path, small: Path) -> None:
    d.mkdir()
    (d / "thesis.tex").write_text("three years of work")


def _run_dir_plus_a_users_file(d: Path, small: Path) -> None:
    shutil.copytree(small, d)
    (d / "notes.txt").write_text("mine")


def _foreign_log(d: Path, small: Path) -> None:
    d.mkdir()
    (d / "events.jsonl").write_text('{"event": "my own telemetry"}\n')


def _log_of_another_type(d: Path, small: Path) -> None:
    d.mkdir()
    write_events_sync(d / "events.jsonl", [("episode.planned", {"arm": "x"}, "x::t::t0")])


def _empty_log_beside_a_users_file(d: Path, small: Path) -> None:
    d.mkdir()
    (d / "events.jsonl").write_bytes(b"")
    (d / "metrics.json").write_text('{"mine": true}')


def _run_dir_with_a_subfolder(d: Path, small: Path) -> None:
    shutil.copytree(small, d)
    (d / "plots").mkdir()
    (d / "plots" / "fig1.svg").write_text("<svg/>")


def _run_dir_with_a_symlinked_artifact(d: Path, small: Path) -> None:
    shutil.copytree(small, d)
    (d / "summary.md").unlink()
    (d.parent / "elsewhere.md").write_text("keep")
    (d / "summary.md").symlink_to(d.parent / "elsewhere.md")


NOT_RUN_DIRS = {
    "a user's folder": (_users_folder, "'thesis.tex', which no run writes"),
    "a run dir plus a user's file": (_run_dir_plus_a_users_file, "'notes.txt'"),
    "a log that is not ours": (_foreign_log, "not an effectbench event log"),
    "a log not starting with run.started": (
        _log_of_another_type,
        "does not start with a run.started",
    ),
    "an empty log beside a user's file": (
        _empty_log_beside_a_users_file,
        "records no complete event",
    ),
    "a run dir with a subfolder": (_run_dir_with_a_subfolder, "'plots', which no run writes"),
    "a symlinked artifact": (_run_dir_with_a_symlinked_artifact, "not a regular file"),
}


@pytest.mark.parametrize("case", sorted(NOT_RUN_DIRS))
def test_force_refuses_what_is_not_a_run_dir_and_deletes_nothing(
    tmp_path: Path, small_run: Path, case: str
) -> None:
    make, expected = NOT_RUN_DIRS[case]
    target = tmp_path / "out"
    make(target, small_run)
    before = _snapshot(tmp_path)
    proc = _cli(*FAKE_RUN, "--out", str(target), "--force", cwd=tmp_path)
    _one_line_refusal(proc, expected)
    assert "nothing was deleted" in proc.stderr
    assert _snapshot(tmp_path) == before


def test_force_with_out_dot_refuses_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "report.docx").write_text("unsaved elsewhere")
    proc = _cli(*FAKE_RUN, "--out", ".", "--force", cwd=tmp_path)
    _one_line_refusal(proc, "never replaces the current directory")
    assert (tmp_path / "report.docx").read_text() == "unsaved elsewhere"


@pytest.fixture
def no_deleting(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any delete fails the test before it happens, so a refusal that does not come
    first (as on / with the unguarded code) costs nothing."""

    def trip(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"tried to delete {args[:1]}")

    for name in ("unlink", "remove", "rmdir"):
        monkeypatch.setattr(os, name, trip)
    monkeypatch.setattr(shutil, "rmtree", trip)
    yield


PROTECTED = {
    ".": (lambda cwd, home: ".", "the current directory"),
    "the empty path": (lambda cwd, home: "", "the current directory"),
    "..": (lambda cwd, home: "..", "a parent of the current directory"),
    "/": (lambda cwd, home: "/", "a parent of the current directory"),
    "the cwd by absolute path": (lambda cwd, home: str(cwd), "the current directory"),
    "a grandparent of the cwd": (
        lambda cwd, home: str(cwd.parent.parent),
        "a parent of the current directory",
    ),
    "home": (lambda cwd, home: str(home), "the home directory"),
}


@pytest.mark.parametrize("case", sorted(PROTECTED))
def test_force_never_replaces_cwd_its_parents_or_home_even_if_they_look_like_run_dirs(
    tmp_path: Path, small_run: Path, monkeypatch: pytest.MonkeyPatch, no_deleting: None, case: str
) -> None:
    out_of, expected = PROTECTED[case]
    cwd = tmp_path / "a" / "b" / "cwd"
    shutil.copytree(small_run, cwd)  # the cwd and home hold a real run's files
    home = tmp_path / "home"
    shutil.copytree(small_run, home)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    before = _snapshot(tmp_path)
    with pytest.raises(RunError, match=f"never replaces {expected}") as info:
        evaluate_provider(
            [ScriptedArm()], InMemoryProvider(), trials=1, out=out_of(cwd, home), force=True
        )
    assert "\n" not in str(info.value)
    assert _snapshot(tmp_path) == before


def test_audit_and_reference_force_are_guarded_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from effectbench.cli.audit import audit_cli_main

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("keep me")
    assert audit_cli_main("effectbench.testing:InMemoryProvider", busy, trials=1, force=True) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'keep.txt', which no run writes" in err
    proc = _cli("reference", "--out", str(busy), "--force", "-q", cwd=tmp_path)
    _one_line_refusal(proc, "'keep.txt', which no run writes")
    assert (busy / "keep.txt").read_text() == "keep me"


# --- what is a run directory -------------------------------------------------------------


def test_force_replaces_a_run_dir_and_its_leftovers_file_by_file(
    tmp_path: Path, small_run: Path
) -> None:
    target = tmp_path / "r"
    shutil.copytree(small_run, target)
    (target / "audit.json").write_text("{}")  # an audit's report
    (target / "episodes.html").write_text("<html>")  # effectbench view --static's page
    (target / "metrics.json.tmp").write_text("{")  # half of an atomic write cut off
    proc = _cli(*FAKE_RUN, "--out", str(target), "--force", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results, _ = untimed_run(target)
    assert len(results) == 1
    written = RUN_FILES - {"audit.json", "episodes.html"}
    assert sorted(p.name for p in target.iterdir()) == sorted(written)


def test_force_replaces_a_run_dir_with_its_screenshot_store(
    tmp_path: Path, small_run: Path
) -> None:
    target = tmp_path / "r"
    shutil.copytree(small_run, target)
    store = target / "blobs" / "sha256"
    store.mkdir(parents=True)
    (store / f"{'a' * 64}.png").write_bytes(b"png")
    (store / ".tmp-x1y2").write_bytes(b"half")
    proc = _cli(*FAKE_RUN, "--out", str(target), "--force", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (target / "blobs").exists()


@pytest.mark.parametrize("stray", ["blobs/notes.txt", "blobs/sha256/holiday.png", "blobs/md5/x"])
def test_force_refuses_a_blob_store_holding_a_users_file(
    tmp_path: Path, small_run: Path, stray: str
) -> None:
    target = tmp_path / "r"
    shutil.copytree(small_run, target)
    (target / "blobs" / "sha256").mkdir(parents=True)
    (target / stray).parent.mkdir(parents=True, exist_ok=True)
    (target / stray).write_text("mine")
    proc = _cli(*FAKE_RUN, "--out", str(target), "--force", cwd=tmp_path)
    assert proc.returncode == 2
    assert "nothing was deleted" in proc.stderr
    assert (target / stray).read_text() == "mine"
    assert (target / "events.jsonl").is_file()


def test_force_replaces_a_run_stopped_before_its_first_line(tmp_path: Path) -> None:
    for name, content in (("empty", b""), ("torn", b'{"v":1,"seq":0,"type":"run.started","ts":17')):
        target = tmp_path / name
        target.mkdir()
        (target / "events.jsonl").write_bytes(content)
        prepare_out_dir(target, force=True)
        assert list(target.iterdir()) == []


def test_an_empty_directory_needs_no_force(tmp_path: Path) -> None:
    target = tmp_path / "fresh"
    target.mkdir()
    proc = _cli(*FAKE_RUN, "--out", str(target), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_run_files_cover_what_runs_audits_and_the_viewer_write() -> None:
    from effectbench.audit.checks import AUDIT_FILE
    from effectbench.core.rundir import ARTIFACT_FILES, EPISODES_PAGE_FILE
    from effectbench.report.page import REPORT_FILE
    from effectbench.run.scheduler import LOG_NAME

    assert {LOG_NAME, *ARTIFACT_FILES, AUDIT_FILE, REPORT_FILE, EPISODES_PAGE_FILE} == RUN_FILES


def test_a_locked_run_dir_is_refused_in_process(tmp_path: Path, small_run: Path) -> None:
    target = tmp_path / "r"
    shutil.copytree(small_run, target)
    fd = os.open(target / "events.jsonl", os.O_RDWR)  # the lock scheduler._exclusive takes
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RunError, match="in use by a running effectbench process"):
            evaluate_provider([ScriptedArm()], InMemoryProvider(), trials=1, out=target, force=True)
    finally:
        os.close(fd)
    assert _snapshot(target) == _snapshot(small_run)


# --- live runs ---------------------------------------------------------------------------


def _wait_for(path: Path, needle: bytes, proc: subprocess.Popen[str]) -> None:
    """Poll (bounded) until ``path`` holds ``needle``: the run reached that point."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if path.is_file() and needle in path.read_bytes():
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    raise AssertionError(f"{path} never held {needle!r}")


@pytest.fixture
def gated_run(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, Path]]:
    """A real run in ``tmp/x`` whose one episode waits, arm started, until ``tmp/gate``."""
    out, gate = tmp_path / "x", tmp_path / "gate"
    argv = [
        *effectbench_command(),
        *FAKE_RUN[:4],
        "test_force_guard:GateArm",
        *FAKE_RUN[5:],
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=pythonpath_env(TESTS, HERE, **{GATE_ENV: str(gate)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(out / "events.jsonl", b'"episode.arm_started"', proc)
        yield proc, out, gate
    finally:
        gate.touch()
        if proc.poll() is None:
            try:
                proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_force_refuses_a_run_dir_a_live_run_holds(
    tmp_path: Path, gated_run: tuple[subprocess.Popen[str], Path, Path]
) -> None:
    proc, out, gate = gated_run
    log_before = (out / "events.jsonl").stat().st_ino
    second = _cli(*FAKE_RUN, "--out", str(out), "--force", cwd=tmp_path)
    _one_line_refusal(second, "in use by a running effectbench process")
    assert (out / "events.jsonl").stat().st_ino == log_before
    gate.touch()
    stdout, stderr = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, stderr
    assert "gated: n=1" in stdout
    results, _ = untimed_run(out)
    assert list(results) == ["gated::fake::ok::t0"]


@pytest.mark.parametrize("how", ["replaced", "removed"])
def test_a_run_whose_directory_is_replaced_under_it_fails_loudly(
    tmp_path: Path, small_run: Path, gated_run: tuple[subprocess.Popen[str], Path, Path], how: str
) -> None:
    proc, out, gate = gated_run
    out.rename(tmp_path / "moved-away")
    if how == "replaced":  # another run now lives at the path
        shutil.copytree(small_run, out)
    gate.touch()
    stdout, stderr = proc.communicate(timeout=DEADLINE)
    assert proc.returncode != 0, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "was replaced or removed while this run was using it" in lines[0], (
        stderr
    )
    assert "n=" not in stdout, "reported some run's results as its own"
    if how == "replaced":
        assert _snapshot(out) == _snapshot(small_run), "wrote into the run that replaced it"
    else:
        assert not out.exists()


@pytest.mark.parametrize("when", ["attestations", "audit_provider"])
def test_an_audit_never_reports_a_log_that_replaced_its_own(
    tmp_path: Path, small_run: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Another run takes the path while the artifacts are built (they audit the log too)
    or once the run's lock is free, just before the audit reads the log back."""
    import effectbench.audit.checks as audit_mod
    import effectbench.audit.runner as audit_runner
    from effectbench.run.outdir import RunDirLost

    real = audit_mod.audit_log

    def swapped_first(log_path: Any) -> Any:
        if sys._getframe(1).f_code.co_name == when:
            run_dir = Path(log_path).parent
            run_dir.rename(tmp_path / "moved-away")
            shutil.copytree(small_run, run_dir)
        return real(log_path)

    monkeypatch.setattr(audit_mod, "audit_log", swapped_first)
    out = tmp_path / "audit"
    with pytest.raises(RunDirLost, match="was replaced or removed"):
        anyio.run(
            lambda: audit_runner.audit_provider(
                "effectbench.testing:InMemoryProvider", out_dir=out, trials=1
            )
        )
    # The log, the only record, is untouched (derived files a build under way had already
    # replaced are rebuilt from it by rescore), and no audit report is written.
    assert (out / "events.jsonl").read_bytes() == (small_run / "events.jsonl").read_bytes()
    assert not (out / "audit.json").exists()
    if when == "audit_provider":
        assert _snapshot(out) == _snapshot(small_run)
