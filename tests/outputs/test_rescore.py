"""`effectbench rescore` never makes a log look sound that is not the one its run finished
with, never scores a run that is still going, and never leaves a worker behind when it
is killed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_env import TESTS, pythonpath_env
from line_edits import _rechain

from effectbench.api import evaluate_provider
from effectbench.audit.attest import attestations
from effectbench.log.reader import LogEntry, read_log, verify_log, write_events_sync
from effectbench.outputs.artifacts import ArtifactError, build_artifacts, rescore_artifacts
from effectbench.outputs.parallel import MIN_PARALLEL_BYTES
from effectbench.run.scheduler import run_lock_held
from effectbench.testing import InMemoryProvider, ScriptedArm, effectbench_command, run_cli
from effectbench.verify import verify_run

ENV = pythonpath_env(TESTS)
DEADLINE = 30.0
"""Bound on every wait for another process; a passing test never gets near it."""


_cli = partial(run_cli, env=ENV)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = evaluate_provider(
        [ScriptedArm()],
        InMemoryProvider(("ok", "phantom")),
        trials=2,
        out=tmp_path_factory.mktemp("finished") / "run",
    )
    return run.run_dir


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- tampering


def _truncate_to_one(lines: list[bytes]) -> list[bytes]:
    return lines[:1]


def _drop_last(lines: list[bytes]) -> list[bytes]:
    return lines[:-1]


def _append_event(lines: list[bytes]) -> list[bytes]:
    """One more event after run.finished, correctly chained."""
    extra = orjson.dumps(
        {"v": 1, "seq": 0, "type": "run.resumed", "ts": 1.0, "ep": None,
         "data": {"plan_hash": "x", "kept": 4, "abandoned": 0, "concurrency": 1}}
    )  # fmt: skip
    return _rechain([*lines, extra])


def _append_finished(lines: list[bytes]) -> list[bytes]:
    """The log still ends with a clean run.finished, one event later than recorded."""
    return _rechain([*lines, lines[-1]])


def _rewrite(lines: list[bytes]) -> list[bytes]:
    """Every phantom success turned into a halt, and the chain recomputed: same count."""
    edited = [
        ln.replace(b'"reported_success":true', b'"reported_success":false')
        if b"phantom" in ln and b'"type":"episode.reported"' in ln
        else ln
        for ln in lines
    ]
    assert edited != lines
    return _rechain(edited)


TAMPER: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    "truncated to 1 line": _truncate_to_one,
    "last line deleted": _drop_last,
    "an event appended": _append_event,
    "a run.finished appended": _append_finished,
    "lines rewritten and re-chained": _rewrite,
}


def _tampered(src: Path, dst: Path, how: str) -> Path:
    shutil.copytree(src, dst)
    log = dst / "events.jsonl"
    lines = TAMPER[how](log.read_bytes().splitlines())
    log.write_bytes(b"".join(ln + b"\n" for ln in lines))
    assert verify_log(log).ok  # the chain alone cannot tell
    return dst


@pytest.mark.parametrize("how", sorted(TAMPER))
def test_rescore_refuses_a_tampered_log_and_never_launders_it(
    finished_run: Path, tmp_path: Path, how: str
) -> None:
    run = _tampered(finished_run, tmp_path / "run", how)
    recorded = orjson.loads((finished_run / "manifest.json").read_bytes())
    assert not verify_run(run).ok
    before = _files(run)
    for workers in (1, 2):  # the one-process and the sharded pass
        with pytest.raises(ArtifactError, match="is not the log its run finished with"):
            rescore_artifacts(run, workers=workers, attest=attestations)
        assert _files(run) == before, "a refused rescore wrote something"

    built = rescore_artifacts(run, allow_incomplete=True, attest=attestations)
    assert built.incomplete is not None
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    assert (manifest["log"], manifest["run_finished"]) == (
        recorded["log"],
        recorded["run_finished"],
    ), "the run's record of its end was rewritten"
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    build_artifacts(run, out_dir=rebuilt, attest=attestations)
    assert (run / "results.jsonl").read_bytes() == (rebuilt / "results.jsonl").read_bytes()
    report = verify_run(run)
    assert not report.ok
    assert any("events.jsonl: hash chain check failed" in r for r in report.reasons), report

    with pytest.raises(ArtifactError):  # and it stays refused
        rescore_artifacts(run, attest=attestations)
    assert not verify_run(run).ok


@pytest.mark.parametrize("how", sorted(TAMPER))
def test_cli_rescore_refusal_is_one_line_exit_2(
    finished_run: Path, tmp_path: Path, how: str
) -> None:
    run = _tampered(finished_run, tmp_path / "run", how)
    before = _files(run)
    proc = _cli("rescore", str(run), cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--allow-incomplete" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert _files(run) == before


def test_cli_allow_incomplete_scores_with_a_warning_and_verify_still_fails(
    finished_run: Path, tmp_path: Path
) -> None:
    run = _tampered(finished_run, tmp_path / "run", "truncated to 1 line")
    proc = _cli("rescore", "--allow-incomplete", str(run), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "coverage 0.0%" in proc.stdout
    assert proc.stderr.count("\n") == 1 and "will not call the run sound" in proc.stderr
    proc = _cli("verify", str(run), cwd=tmp_path)
    assert proc.returncode == 1 and "NOT sound" in proc.stdout, proc.stdout


def test_rescore_of_a_finished_run_is_byte_identical(finished_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    before = _files(run)
    for workers in (1, 2):
        rescore_artifacts(run, workers=workers, attest=attestations)
        assert _files(run) == before
    assert verify_run(run).ok


def _interrupted(src: Path, dst: Path, keep: Callable[[list[bytes]], list[bytes]]) -> Path:
    """A log as an interrupted run leaves it: no artifacts (the run writes them only when it
    finishes)."""
    dst.mkdir()
    lines = keep((src / "events.jsonl").read_bytes().splitlines())
    (dst / "events.jsonl").write_bytes(b"".join(ln + b"\n" for ln in lines))
    return dst


def _stopped(lines: list[bytes]) -> list[bytes]:
    """Stopped by a signal: the last run.finished says interrupted."""
    last = lines[-1].replace(b'"interrupted":false', b'"interrupted":true')
    assert last != lines[-1]
    return _rechain([*lines[:-1], last])


@pytest.mark.parametrize("keep", [_drop_last, _stopped], ids=["killed", "stopped"])
def test_an_interrupted_run_is_to_be_resumed_not_rescored(
    finished_run: Path, tmp_path: Path, keep: Callable[[list[bytes]], list[bytes]]
) -> None:
    run = _interrupted(finished_run, tmp_path / "run", keep)
    proc = _cli("rescore", str(run), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"effectbench run --resume {run}" in proc.stderr and "--allow-incomplete" in proc.stderr
    assert [p.name for p in run.iterdir()] == ["events.jsonl"]

    rescore_artifacts(run, allow_incomplete=True, attest=attestations)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    assert manifest["log"] is None and manifest["run_finished"] is None
    assert "no record of how the run ended" in (run / "summary.md").read_text()
    report = verify_run(run)
    assert not report.ok
    assert any("manifest.json: holds no record of how the run ended" in r for r in report.reasons)


def test_a_finished_log_without_its_record_is_not_made_sound(
    finished_run: Path, tmp_path: Path
) -> None:
    """Deleting manifest.json does not get a re-chained log past the check."""
    run = _tampered(finished_run, tmp_path / "run", "lines rewritten and re-chained")
    (run / "manifest.json").unlink()
    with pytest.raises(ArtifactError, match="no record of how its run ended"):
        rescore_artifacts(run, attest=attestations)
    rescore_artifacts(run, allow_incomplete=True, attest=attestations)
    assert not verify_run(run).ok


# --------------------------------------------------------------------------- a live run


def _wait_for(what: str, ready: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE
    while not ready():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.005)


@contextlib.contextmanager
def _hanging_run(run: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real run whose arm hangs, from its arm's start until the block ends (then killed)."""
    live = subprocess.Popen(
        [*effectbench_command(), "run", "--provider", "effectbench.testing:InMemoryProvider",
         "--arm", "effectbench.testing:HangingArm", "--trials", "1", "--out", str(run), "-q"],
        cwd=run.parent, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        log = run / "events.jsonl"
        _wait_for(
            "the run's arm to start", lambda: log.is_file() and b"arm_started" in log.read_bytes()
        )
        assert run_lock_held(log)
        yield live
        assert live.poll() is None, "the run ended before the check"
    finally:
        live.kill()
        live.wait(timeout=DEADLINE)
    assert not run_lock_held(log)


def test_rescore_refuses_a_live_run_and_writes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "live"
    with _hanging_run(run):
        before = _files(run)
        proc = _cli("rescore", str(run), cwd=tmp_path)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "in use by a run" in lines[0], proc.stderr
        assert _files(run) == before
    proc = _cli("rescore", str(run), cwd=tmp_path)  # killed: now it is one to resume
    assert proc.returncode == 2 and "--resume" in proc.stderr


def test_verify_of_a_live_run_says_it_is_live(tmp_path: Path) -> None:
    """Not "interrupted, continue it with --resume": a resume of a live run is refused."""
    run = tmp_path / "live"
    with _hanging_run(run):
        proc = _cli("verify", str(run), cwd=tmp_path)
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert "the run is live" in proc.stdout, proc.stdout
        assert "--resume" not in proc.stdout and "interrupted" not in proc.stdout, proc.stdout
    proc = _cli("verify", str(run), cwd=tmp_path)  # killed: now it is one to resume
    assert proc.returncode == 1
    assert "the run is live" not in proc.stdout and "--resume" in proc.stdout, proc.stdout


# --------------------------------------------------------------------------- killing a rescore


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory, finished_run: Path) -> Path:
    """A finished run whose log is large enough for the two-process pass: the finished
    run's episodes repeated over many trials, with its record as a run writes it."""
    events = list(read_log(finished_run / "events.jsonl"))
    started = next(e for e in events if e.type == "run.started")
    template: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for e in events:
        if e.ep is not None and e.ep.endswith("::t0"):
            template.setdefault(e.ep[: -len("t0")], []).append((e.type, e.data))
    size_per_trial = sum(len(orjson.dumps(d)) + 120 for evs in template.values() for _, d in evs)
    trials = 3 * MIN_PARALLEL_BYTES // 2 // size_per_trial
    plan = {**started.data["plan"], "trials": trials}

    def entries() -> Iterator[LogEntry]:
        yield ("run.started", {**started.data, "plan": plan}, None)
        for trial in range(trials):
            for prefix, evs in template.items():
                for type_, data in evs:
                    if type_ == "episode.planned":
                        data = {**data, "trial": trial}
                    yield (type_, data, f"{prefix}t{trial}")
        finished = {"interrupted": False, "episodes_finished": trials * len(template)}
        yield ("run.finished", {**finished, "episodes_failed": 0}, None)

    run = tmp_path_factory.mktemp("big") / "run"
    run.mkdir()
    write_events_sync(run / "events.jsonl", entries())
    assert (run / "events.jsonl").stat().st_size >= MIN_PARALLEL_BYTES
    build_artifacts(run, workers=1, attest=attestations)
    return run


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        text = " ".join(
            p.name
            for p in Path("/proc").iterdir()
            if p.name.isdigit() and _stat(int(p.name)).get("ppid") == pid
        )
    return [int(c) for c in text.split()]


def _stat(pid: int) -> dict[str, Any]:
    """State, parent and bytes read of a process; empty once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        io = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return {}
    fields = stat.rsplit(")", 1)[1].split()
    rchar = next(int(ln.split()[1]) for ln in io.splitlines() if ln.startswith("rchar:"))
    return {"state": fields[0], "ppid": int(fields[1]), "rchar": rchar}


def _gone(pid: int) -> bool:
    return _stat(pid).get("state", "Z") in ("Z", "X")


POINTS: dict[str, Callable[[dict[str, Any], int], bool]] = {
    "as it forks": lambda st, share: True,
    "half way": lambda st, share: st.get("rchar", share) >= share // 2,
    "blocked sending": lambda st, share: st.get("rchar", share) >= share and st.get("state") == "S",
}
"""Where the worker is, from what it read of its part (``share``: the second half of the
log, split at a line start, so a little under half of it)."""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("point", list(POINTS))
def test_killing_rescore_leaves_no_worker_and_closes_stderr(
    big_run: Path, tmp_path: Path, point: str, sig: signal.Signals
) -> None:
    """The rescore is stopped as soon as its worker appears, the worker is let run to the
    point, then the rescore gets the signal: the worker must go with it, and a caller
    reading stderr must see EOF."""
    run = tmp_path / "run"
    shutil.copytree(big_run, run)
    share = (run / "events.jsonl").stat().st_size // 2 - 4096
    proc = subprocess.Popen(
        [*effectbench_command(), "rescore", "--workers", "2", str(run)],
        cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    workers: list[int] = []
    try:
        end = time.monotonic() + DEADLINE
        while not workers:
            assert proc.poll() is None, "the rescore ended without forking its worker"
            assert time.monotonic() < end, "no worker appeared"
            workers = _children(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)  # its worker runs on; it does not
        worker = workers[0]
        _wait_for(
            f"the worker to get {point}",
            lambda: _gone(worker) or POINTS[point](_stat(worker), share),
        )
        os.kill(proc.pid, sig)
        os.kill(proc.pid, signal.SIGCONT)
        try:
            _, err = proc.communicate(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            raise AssertionError("stderr stayed open after the rescore was killed") from None
        assert proc.returncode == -sig
        _wait_for("the worker to exit", lambda: _gone(worker))
    finally:
        for pid in (proc.pid, *workers):
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=DEADLINE)
    assert b"Traceback" not in err


# --------------------------------------------------------------------------- evidence


class _ShootingArm(ScriptedArm):
    """The scripted arm, plus one screenshot per episode (any bytes: blobs are opaque)."""

    name = "shooting"

    async def run(self, task: Any, env: Any) -> Any:
        env.telemetry.screenshot(f"png of {task.episode_id}".encode(), "final")
        return await super().run(task, env)


@pytest.fixture(scope="module")
def shot_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = evaluate_provider(
        [_ShootingArm()],
        InMemoryProvider(("ok", "phantom")),
        trials=2,
        out=tmp_path_factory.mktemp("shots") / "run",
        report=False,
    )
    return run.run_dir


def test_rescore_refuses_an_edited_screenshot_as_verify_does(
    shot_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(shot_run, run)
    blobs = sorted((run / "blobs" / "sha256").iterdir())
    assert len(blobs) == 4
    blobs[1].write_bytes(b"a different picture")
    reasons = verify_run(run).reasons
    assert any("screenshot" in r and "does not match its hash" in r for r in reasons)
    before = _files(run)
    for workers in (1, 2):  # the one-process and the sharded pass
        with pytest.raises(ArtifactError, match="does not match its hash"):
            rescore_artifacts(run, workers=workers, attest=attestations)
        assert _files(run) == before, "a refused rescore wrote something"
    proc = _cli("rescore", str(run), cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "screenshot" in proc.stderr and "--allow-incomplete" in proc.stderr, proc.stderr
    blobs[2].unlink()
    with pytest.raises(ArtifactError, match=r"\(and 1 more\)"):
        rescore_artifacts(run, attest=attestations)
    built = rescore_artifacts(run, allow_incomplete=True, attest=attestations)
    assert built.incomplete is not None and "screenshot" in built.incomplete
    assert not verify_run(run).ok


def test_rescore_of_a_run_with_intact_screenshots_is_byte_identical(shot_run: Path) -> None:
    before = _files(shot_run)
    for workers in (1, 2):
        assert rescore_artifacts(shot_run, workers=workers, attest=attestations).incomplete is None
        assert _files(shot_run) == before
