"""Roundup behind the fault proxy, end to end on a few episodes (never the full pack)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from effectbench_roundup import RoundupProvider
from effectbench_roundup.oracle import read_tracker
from effectbench_roundup.pages import banner, forms
from effectbench_roundup.seed import HOMONYM_TITLE
from effectbench_roundup.tasks import DEFENDED, TASKS, VARIANTS, task_id

from effectbench.api import evaluate_provider_async
from effectbench.arms.baselines import EffectVerifiedArm, ScreenOnlyArm
from effectbench.model import Row, Snapshot, TrueState
from effectbench.scoring.judge import judge

pytestmark = pytest.mark.anyio


def test_the_pack_has_every_task_in_both_variants_and_the_declared_defences() -> None:
    ids = {t.task_id for t in TASKS}
    assert len(ids) == len(TASKS) == 45
    for variant in VARIANTS:
        assert task_id(variant, "open", "ok") in ids
        assert task_id(variant, "refuse_missing", "ok") in ids
    assert task_id("csrf", "open", "double") not in ids  # racy under one-shot tokens
    by_id = {t.task_id: t for t in TASKS}
    for variant, job, fault in DEFENDED:
        assert by_id[task_id(variant, job, fault)].correct_action_available
    assert not by_id[task_id("nocsrf", "open", "duplicate")].correct_action_available


def test_each_jobs_effect_refuses_any_other_change_of_the_issue_or_a_stray_row() -> None:
    """The assign job's reference record is CORRECT; the same record with the issue's title,
    status or priority changed, a second copy of the issue, or a stray message is not."""
    task = next(t for t in TASKS if t.task_id == task_id("nocsrf", "assign", "ok"))
    effect = task.expected_effect.resolve({"note": "note x"})
    issue = {"id": 1, "title": HOMONYM_TITLE, "status": "unread", "priority": "bug",
             "assignedto": None, "superseder": "", "messages": 1, "last_note": "first"}  # fmt: skip
    msg = {"id": 1, "issue": 1, "content": "first"}
    pre = Snapshot(readable=True, tables={"issue": (issue,), "msg": (msg,)})
    done = {**issue, "status": "chatting", "assignedto": "alice", "messages": 2,
            "last_note": "note x"}  # fmt: skip
    note = {"id": 4, "issue": 1, "content": "note x"}

    def post(
        issues: tuple[Row, ...], msgs: tuple[Row, ...] = (msg, note), **more: tuple[Row, ...]
    ) -> Snapshot:
        return Snapshot(readable=True, tables={"issue": issues, "msg": msgs, **more})

    assert judge(effect, pre, post((done,))).true_state is TrueState.CORRECT
    wrong = [
        post(({**done, "title": ""},)),
        post(({**done, "status": "resolved"},)),
        post(({**done, "priority": None},)),
        post((done, {**done, "id": 5})),
        post((done,), (msg, note, {"id": 5, "issue": None, "content": None})),
        post((done,), dangling=({"table": "issue_superseder", "nodeid": None, "linkid": None},)),
    ]
    for snapshot in wrong:
        assert judge(effect, pre, snapshot).true_state is TrueState.WRONG_PERSISTED, snapshot


def test_pages_give_a_browsers_form_values_and_the_banner() -> None:
    page = (
        '<form method="POST" action="issue1" enctype="multipart/form-data">'
        '<input name="title" value="A &amp; B"><select name="priority">'
        '<option value="1">critical</option><option value="3" selected>bug</option></select>'
        '<textarea name="@note">hi</textarea><input type="checkbox" name="x">'
        '<input type="hidden" name="@csrf" value="tok"><input type="submit" value="Save"></form>'
        '<p class="ok-message"><span>msg 2 created<br />issue 2 created</span></p>'
    )
    (form,) = forms(page)
    assert form.values == (("title", "A & B"), ("priority", "3"), ("@note", "hi"), ("@csrf", "tok"))
    assert (form.action, form.enctype) == ("issue1", "multipart/form-data")
    assert banner(page) == (True, "msg 2 created issue 2 created")
    assert banner('<p class="error-message">Invalid</p>') == (False, "Invalid")


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[RoundupProvider]:
    p = RoundupProvider(tmp_root=tmp_path)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


async def test_pristine_tracker_readback_and_teardown(provider: RoundupProvider) -> None:
    """The oracle reads issues with message text from the file store; the product's own
    readback (issue pages through the proxy) gives the same rows; teardown stops the
    server and is idempotent. (One test: building the pristine tracker is the slow part.)"""
    assert provider.pristine is not None
    snap = read_tracker(provider.pristine)
    assert snap.readable
    issues = snap.rows("issue")
    assert [r["id"] for r in issues] == [1, 2, 3]
    assert issues[0]["title"] == issues[1]["title"]  # the homonyms
    assert issues[0]["last_note"] == "The printer in room 12 smells of smoke."
    assert [m["content"] for m in snap.rows("msg")][2].startswith("My VPN")

    task = next(t for t in TASKS if t.task_id == task_id("csrf", "note", "ok"))
    episode = await provider.provision(task, 0, {"note": "note abc"})
    (pid,) = provider.live_pids()
    readback = episode.env.verifier
    assert readback is not None
    before = await readback.read()
    truth = await episode.oracle.read()
    assert before.readable and before.tables == truth.tables
    # a message on no issue (a stray write) is still read, with issue null
    store = episode.store
    assert store is not None
    # seeded at one instant: an edit redirected to the homonym is never refused as a
    # collision because seeding happened to cross a second between the two issues
    seeded = await store.rows("_issue")
    assert len(seeded) == 3 and len({r.values["_activity"] for r in seeded}) == 1
    (first, *_) = await store.rows("_msg")
    await store.insert("_msg", {**first.values, "id": 99})
    stray = (await episode.oracle.read()).rows("msg")[-1]
    assert stray == {"id": 99, "issue": None, "content": None}
    # an assignee that names no user is not "unassigned"
    (*_, third) = await store.rows("_issue")
    await store.update("_issue", third.locator, {"_assignedto": "mutated"})
    assert (await episode.oracle.read()).rows("issue")[2][
        "assignedto"
    ] == "(no such node 'mutated')"
    # a link row naming no issue is read as a dangling row (it crashed the oracle before)
    assert "dangling" not in truth.tables
    await store.insert("issue_superseder", {})
    assert (await episode.oracle.read()).rows("dangling") == (
        {"table": "issue_superseder", "nodeid": None, "linkid": None},
    )
    await episode.teardown()
    await episode.teardown()  # idempotent
    assert provider.live_pids() == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

    # a port taken between picking it and roundup-server binding it: a fresh one is used
    import socket

    from effectbench_roundup.tracker import Tracker

    tracker = Tracker(provider.pristine, provider.pristine.parent / "port-race")
    moved: list[str] = []
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        tracker.port = taken
        try:
            await tracker.start("http://127.0.0.1:1/tp/", True, on_port=moved.append)
            assert tracker.port != taken and moved == [tracker.upstream]
        finally:
            await tracker.stop()


@pytest.mark.timeout(240)
async def test_defences_and_faults_through_the_scheduler(tmp_path: Path) -> None:
    """A few episodes: Roundup's CSRF token absorbs a duplicate that lands when it is
    off; a phantom banner fools screen_only only; the log shows the injected faults."""
    chosen = [
        task_id("csrf", "open", "duplicate"),
        task_id("nocsrf", "open", "duplicate"),
        task_id("csrf", "open", "phantom"),
    ]
    result = await evaluate_provider_async(
        [ScreenOnlyArm(), EffectVerifiedArm()],
        RoundupProvider(tmp_root=tmp_path),
        trials=1,
        concurrency=3,
        task_globs=chosen,
        out=tmp_path / "run",
    )
    rows = [orjson.loads(x) for x in (result.run_dir / "results.jsonl").read_bytes().splitlines()]
    by_variant = {(r["task_id"], r["arm"]): (r["true_state"], r["outcome"]) for r in rows}
    assert by_variant[(chosen[0], "screen_only")] == ("CORRECT", "SUCCESS")
    assert by_variant[(chosen[0], "effect_verified")] == ("CORRECT", "SUCCESS")
    assert by_variant[(chosen[1], "screen_only")] == ("WRONG_PERSISTED", "SILENT_WRONG_EFFECT")
    assert by_variant[(chosen[1], "effect_verified")] == ("WRONG_PERSISTED", "WRONG_ACTION")
    assert by_variant[(chosen[2], "screen_only")] == ("ABSENT", "SILENT_WRONG_EFFECT")
    assert by_variant[(chosen[2], "effect_verified")] == ("ABSENT", "SAFE_HALT")
    injected = [
        orjson.loads(x)
        for x in result.log_path.read_bytes().splitlines()
        if b'"episode.injected"' in x
    ]
    faults = {(e["ep"], e["data"]["kind"], e["data"]["detail"]["upstream"]) for e in injected}
    assert (f"screen_only::{chosen[0]}::t0", "proxy.duplicate", "302,200") in faults
    assert (f"screen_only::{chosen[1]}::t0", "proxy.duplicate", "302,302") in faults
    assert (f"screen_only::{chosen[2]}::t0", "proxy.phantom", "") in faults


def _children(pid: int, name: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and name.encode() in cmdline:
            out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.timeout(180)
def test_a_sigkilled_harness_leaves_no_roundup_server_behind(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("effectbench")
    args = [str(exe), "run", "--provider", "roundup", "--arm", "screen_only", "--trials", "10",
            "--concurrency", "2", "--task", "roundup::csrf::open::ok", "--out",
            str(tmp_path / "run"), "-q"]  # fmt: skip
    harness = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "EFFECTBENCH_STATE_DIR": str(tmp_path)},
    )
    try:
        deadline = time.monotonic() + 150
        servers: list[int] = []
        while not servers and time.monotonic() < deadline and harness.poll() is None:
            servers = _children(harness.pid, "roundup-server")
            time.sleep(0.05)
        assert servers, "no roundup-server was started"
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in servers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in servers)


@pytest.mark.timeout(300)
def test_a_tracker_killed_under_the_agent_is_an_environment_failure(tmp_path: Path) -> None:
    """The episode's roundup-server SIGKILLed while the agent works: the agent's request
    then fails, and the episode is the environment's failure, not the agent's."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    tests = Path(__file__).resolve().parents[3] / "tests"  # the harness's test arms
    exe = Path(sys.executable).with_name("effectbench")
    out = tmp_path / "run"
    args = [str(exe), "run", "--provider", "roundup", "--arm", "dask_arms:PageAfterBarrierArm",
            "--trials", "1", "--concurrency", "1", "--task", "roundup::csrf::open::ok",
            "--out", str(out), "-q"]  # fmt: skip
    env = {
        **os.environ,
        "EFFECTBENCH_STATE_DIR": str(tmp_path),
        "EFFECTBENCH_TEST_BARRIER": str(barrier),
        "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]),
    }
    harness = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 150
        while not any(barrier.glob("inflight-*")):
            assert harness.poll() is None and time.monotonic() < deadline, harness.communicate()
            time.sleep(0.02)
        (server,) = _children(harness.pid, "roundup-server")
        os.kill(server, signal.SIGKILL)
        (barrier / "go").touch()
        _, err = harness.communicate(timeout=120)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    events = [orjson.loads(x) for x in (out / "events.jsonl").read_bytes().splitlines()]
    (failed,) = [e["data"] for e in events if e["type"] == "episode.failed"]
    assert failed["failure_class"] == "environment", failed
    assert failed["stage"] == "service" and "the Roundup tracker" in failed["error"], failed
    assert "Traceback" not in err, err
