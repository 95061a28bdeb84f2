"""effectbench report / compare: built from artifacts only, deterministic, self-contained.

The browser-level checks (DOM figures, console, network, the highlighted field) are in
test_report_browser.py; these read the HTML and the model directly.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_env import TESTS, pythonpath_env

from effectbench.api import evaluate_provider
from effectbench.core.rundir import ARTIFACT_FILES
from effectbench.log.reader import LoggedEvent
from effectbench.report import ReportError, build_report
from effectbench.report.data import EpisodeRef, load_run
from effectbench.report.drill import ShotBudget, drill, screenshot_image, select_episodes
from effectbench.report.filmstrip import Mark
from effectbench.testing import InMemoryProvider, ScriptedArm, run_cli

SWER_EPISODE = "screen_only::mockmed::partial::t0"


_cli = partial(run_cli, env=pythonpath_env(TESTS))


@pytest.fixture(scope="module")
def mockmed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = evaluate_provider(
        ["screen_only", "effect_verified"],
        "mockmed",
        trials=2,
        out=tmp_path_factory.mktemp("report") / "run",
    )
    return run.run_dir


@pytest.fixture(scope="module")
def fake_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("fake")
    a = evaluate_provider(
        [ScriptedArm()], InMemoryProvider(("ok", "phantom")), trials=2, out=root / "a"
    )
    b = evaluate_provider(
        [ScriptedArm()], InMemoryProvider(("ok", "phantom")), trials=2, out=root / "b"
    )
    c = evaluate_provider(
        [ScriptedArm()], InMemoryProvider(("ok", "phantom")), trials=3, out=root / "c"
    )
    return a.run_dir, b.run_dir, c.run_dir


def _digests(run_dir: Path) -> dict[str, str]:
    return {n: hashlib.sha256((run_dir / n).read_bytes()).hexdigest() for n in ARTIFACT_FILES}


def test_run_writes_the_report_and_rescore_rewrites_the_same_bytes(
    mockmed_run: Path, tmp_path: Path
) -> None:
    report = mockmed_run / "report.html"
    first = report.read_bytes()
    copy = tmp_path / "copy"
    shutil.copytree(mockmed_run, copy)
    (copy / "report.html").unlink()
    proc = _cli("rescore", str(copy), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (copy / "report.html").read_bytes() == first
    assert _digests(copy) == _digests(mockmed_run)


def test_the_report_leaves_the_four_artifacts_untouched(mockmed_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(mockmed_run, copy)
    (copy / "report.html").unlink()
    proc = _cli("rescore", "--no-report", str(copy), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (copy / "report.html").exists()
    assert _digests(copy) == _digests(mockmed_run)
    manifest = orjson.loads((copy / "manifest.json").read_bytes())
    assert manifest["artifacts"] == list(ARTIFACT_FILES)


def test_run_no_report_writes_none(tmp_path: Path) -> None:
    proc = _cli(
        "run", "--provider", "effectbench.testing:InMemoryProvider",
        "--arm", "effectbench.testing:ScriptedArm", "--trials", "1",
        "--out", str(tmp_path / "r"), "--no-report", "-q", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r" / "metrics.json").is_file()
    assert not (tmp_path / "r" / "report.html").exists()


def test_the_page_references_nothing_outside_itself(mockmed_run: Path) -> None:
    html = (mockmed_run / "report.html").read_text("utf-8")
    refs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert refs and all(r.startswith(("#", "data:")) for r in refs), refs
    assert re.findall(r"url\(([^)]*)\)", html) == ["#hatch"]
    assert "@import" not in html and '<link rel="stylesheet"' not in html
    assert "<script src" not in html
    assert "@media print" in html


def test_telemetry_without_a_source_reads_no_source_not_zero(mockmed_run: Path) -> None:
    html = (mockmed_run / "report.html").read_text("utf-8")
    section = html[
        html.index('<section id="telemetry">') : html.index(
            "</section>", html.index('<section id="telemetry">')
        )
    ]
    rows = re.findall(r"<tr><th scope=\"row\">([^<]+)</th>(.*?)</tr>", section)
    assert [name for name, _ in rows] == ["screen_only", "effect_verified"]
    for _, cells in rows:
        values = re.findall(r"<td[^>]*>([^<]*)</td>", cells)
        # wall p50, wall p95, setup p50, model calls, tokens, cost: MockMed's arms have no model
        assert values[3:] == ["no source", "no source", "no source"], values


def test_user_errors_are_one_line(mockmed_run: Path, tmp_path: Path) -> None:
    cases = [
        (["report", str(tmp_path / "nowhere")], "does not exist"),
        (["report", str(mockmed_run), "--episode", "nope::x::t0"], "not in this run"),
        (["report", str(mockmed_run), "--drill-limit", "0"], "--drill-limit"),
        (["compare", str(mockmed_run)], "at least two"),
    ]
    for args, needle in cases:
        proc = _cli(*args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_log_that_is_not_the_manifests_is_refused(mockmed_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(mockmed_run, copy)
    manifest = orjson.loads((copy / "manifest.json").read_bytes())
    manifest["log"]["final_hash"] = "0" * 64
    (copy / "manifest.json").write_bytes(orjson.dumps(manifest))
    with pytest.raises(ReportError, match="rescore"):
        build_report(copy)


# --------------------------------------------------------------------------- sampling


def _refs(n_per: int) -> list[EpisodeRef]:
    labels = ["success"] * n_per + ["SWER phantom"] + ["safe halt"] * n_per
    return [EpisodeRef(i, f"a::t{i}::t0", "a", f"t{i}", 0, label) for i, label in enumerate(labels)]


def test_sampling_keeps_every_outcome_in_plan_order_and_says_so() -> None:
    refs = _refs(50)
    picked, note = select_episodes(refs, 9)
    labels = [p.label for p in picked]
    assert len(picked) == 9 and "SWER phantom" in labels
    assert [p.slot for p in picked] == sorted(p.slot for p in picked)
    assert note.startswith("Sampled: 9 of 101") and "--episode" in note
    assert select_episodes(refs, 9) == (picked, note)
    more, _ = select_episodes(refs, 9, ["a::t100::t0"])
    assert len(more) == 10 and more[-1].slot == 100
    every, note_all = select_episodes(refs, 1000)
    assert len(every) == 101 and note_all == "All 101 episodes have a drill-down."


def test_drill_limit_samples_the_page_and_episode_adds_one(
    mockmed_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r.html"
    proc = _cli("report", str(mockmed_run), "--out", str(out), "--drill-limit", "3",
                "--episode", "effect_verified::mockmed::stale::t1", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"report: {out}"
    html = out.read_text("utf-8")
    assert "Sampled: 4 of 36 episodes" in html
    assert html.count('<details class="ep"') == 4
    assert 'data-episode="effect_verified::mockmed::stale::t1"' in html


# --------------------------------------------------------------------------- the diff


def _ev(seq: int, type_: str, data: dict[str, Any], ep: str = "a::t::t0") -> LoggedEvent:
    return LoggedEvent(seq, type_, 100.0 + seq / 1000, ep, data, seq + 1)


def _snap(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"readable": True, "tables": {"notes": list(rows)}, "error": None}


def _episode_events(
    pre: dict[str, Any], post: dict[str, Any], extra: list[LoggedEvent] = ()
) -> list[LoggedEvent]:  # type: ignore[assignment]
    effect = {
        "record_written": {"table": "notes", "selector": {"owner": "p1"}, "expected_count": 1,
                           "idempotency_key": None, "forbid_collateral_loss": True,
                           "forbid_stray_writes": False, "count_new_only": False, "id_field": "id"},
        "field_equals": [{"field": "note", "expected": "right"}],
    }  # fmt: skip
    planned = {"arm": "a", "task_id": "t", "trial": 0, "params": {}, "effect": effect}
    return [
        _ev(0, "episode.planned", planned),
        _ev(1, "episode.pre_snapshot", {"attempt": 0, "snapshot": pre}),
        _ev(2, "episode.telemetry", {"model_calls": None, "input_tokens": None,
                                     "output_tokens": None, "cost_usd": None, "actions": 1}),
        _ev(3, "episode.reported", {"reported_success": True, "halted": False,
                                    "message": "saved", "wall_ms": 3.0}),
        _ev(4, "episode.post_read", {"attempt": 0, "snapshot": post}),
        *extra,
        _ev(9, "episode.finished", {}),
    ]  # fmt: skip


def test_the_diff_marks_added_changed_removed_rows_and_the_wrong_field(tmp_path: Path) -> None:
    pre = _snap(
        {"id": 1, "owner": "p2", "note": "theirs"},
        {"id": 2, "owner": "p1", "note": "old"},
        {"id": 4, "owner": "p3", "note": "same"},
    )
    post = _snap(
        {"id": 2, "owner": "p1", "note": "wrong"},
        {"id": 3, "owner": "p9", "note": "new"},
        {"id": 4, "owner": "p3", "note": "same"},
    )
    ref = EpisodeRef(0, "a::t::t0", "a", "t", 0, "SWER wrong write")
    d = drill(
        ref,
        {"verdict_reasons": ["field 'note' ..."]},
        _episode_events(pre, post),
        tmp_path,
        ShotBudget(),
    )
    (table,) = d.diff.tables
    assert (table.added, table.changed, table.removed) == (1, 1, 1)
    by_state = {r.state: r for r in table.rows}
    assert set(by_state) == {"added", "changed", "removed", "same"}
    changed = by_state["changed"]
    assert changed.selected and changed.key == "2"
    note = next(f for f in changed.fields if f.name == "note")
    assert (note.state, note.before, note.wrong, note.expected) == (
        "changed",
        '"old"',
        True,
        '"right"',
    )
    assert not any(f.wrong for f in changed.fields if f.name != "note")
    assert not any(f.wrong for r in table.rows if r.state != "changed" for f in r.fields)
    assert "model_calls no source" in d.timeline[2].text
    assert d.reported_success is True and d.message == "saved"
    assert d.reasons == ("field 'note' ...",)


def test_an_unreadable_read_has_no_diff_but_says_why(tmp_path: Path) -> None:
    post = {"readable": False, "tables": {}, "error": "db locked"}
    ref = EpisodeRef(0, "a::t::t0", "a", "t", 0, "failed: evaluation")
    d = drill(ref, {}, _episode_events(_snap(), post), tmp_path, ShotBudget())
    assert d.diff.tables == () and d.diff.note == "the post read was unreadable: db locked"


# --------------------------------------------------------------------------- screenshots

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f80f0000010101005e2a9d0e0000000049454e44ae426082"
)


def test_the_screenshot_hook_embeds_a_blob_that_matches_its_hash(tmp_path: Path) -> None:
    digest = hashlib.sha256(PNG).hexdigest()
    blob = tmp_path / "blobs" / f"{digest}.png"
    blob.parent.mkdir()
    blob.write_bytes(PNG)
    shot = screenshot_image(tmp_path, f"blobs/{digest}.png")
    assert shot.data_uri is not None and shot.data_uri.startswith("data:image/png;base64,")
    assert screenshot_image(tmp_path, f"blobs/{digest}.png", "f" * 64).data_uri is None
    assert (
        screenshot_image(tmp_path, "blobs/missing.png").note
        == "blob not found in the run directory"
    )
    assert screenshot_image(tmp_path, "../x.png").note == "outside the run directory; not shown"

    event = _ev(5, "episode.screenshot", {"path": f"blobs/{digest}.png", "sha256": digest})
    ref = EpisodeRef(0, "a::t::t0", "a", "t", 0, "success")
    d = drill(ref, {}, _episode_events(_snap(), _snap(), [event]), tmp_path, ShotBudget())
    assert [s.data_uri for s in d.screenshots] == [shot.data_uri]
    tight = ShotBudget(10)
    d = drill(ref, {}, _episode_events(_snap(), _snap(), [event]), tmp_path, tight)
    assert d.screenshots[0].data_uri is None and "budget" in (d.screenshots[0].note or "")


def test_a_protocol_agents_actions_are_replayed_on_the_screenshot_before_them(
    tmp_path: Path,
) -> None:
    """Actions as an agent's ``action`` messages log them (any kind, x/y in the detail,
    no citation) go on the latest screenshot; a second attempt replaces the first."""
    digest = hashlib.sha256(PNG).hexdigest()
    blob = tmp_path / "blobs" / f"{digest}.png"
    blob.parent.mkdir()
    blob.write_bytes(PNG)
    gone = "e" * 64

    def shot(seq: int, sha: str) -> LoggedEvent:
        return _ev(seq, "episode.screenshot", {"path": f"blobs/{sha}.png", "sha256": sha})

    def act(seq: int, kind: str, **detail: Any) -> LoggedEvent:
        return _ev(seq, "episode.action", {"kind": kind, "detail": detail})

    extra = [
        act(4, "navigate", url="http://127.0.0.1/"),
        shot(5, digest),
        act(6, "click", x=0, y=0, selector="textarea"),
        act(7, "type", text="the note"),
        shot(8, gone),
        act(9, "key", key="Enter"),
    ]
    ref = EpisodeRef(0, "a::t::t0", "a", "t", 0, "success")
    d = drill(ref, {}, _episode_events(_snap(), _snap(), extra), tmp_path, ShotBudget())
    strip = d.filmstrip
    assert strip is not None
    assert [a.text for a in strip.before] == ["navigate: url http://127.0.0.1/"]
    first, second = strip.frames
    assert first.shot.data_uri is not None and (first.shot.width, first.shot.height) == (1, 1)
    assert [a.text for a in first.actions] == [
        "click at (0, 0); selector textarea",
        "type \u201cthe note\u201d",
    ]
    assert first.marks == (Mark(1, "click", 0, 0),)
    assert (
        second.shot.data_uri is None and second.shot.note == "blob not found in the run directory"
    )
    assert [a.text for a in second.actions] == ["key Enter"]
    assert d.screenshots == (first.shot, second.shot)
    replanned = [*extra, _ev(10, "episode.planned", {"trial": 0}), act(11, "click", x=1, y=1)]
    d = drill(ref, {}, _episode_events(_snap(), _snap(), replanned), tmp_path, ShotBudget())
    assert d.filmstrip is None and d.screenshots == ()  # the scored attempt logged none


def test_an_action_goes_on_the_screenshot_it_cites(tmp_path: Path) -> None:
    """Computer-use actions cite their image by sha256: they go on that frame even when
    another was logged since, and one citing an image the run did not keep (``seen``,
    --screenshots final) gets a frame saying so, never another frame's picture."""
    digest = hashlib.sha256(PNG).hexdigest()
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / f"{digest}.png").write_bytes(PNG)
    unkept, other = "a" * 64, "b" * 64

    def act(seq: int, **detail: Any) -> LoggedEvent:
        return _ev(seq, "episode.action", {"kind": "computer", "detail": detail})

    extra = [
        act(4, action="click", x=5, y=6, button="right", seen=unkept),
        _ev(5, "episode.screenshot", {"path": f"blobs/{digest}.png", "sha256": digest}),
        _ev(6, "episode.screenshot", {"path": f"blobs/{other}.png", "sha256": other}),
        act(7, action="drag", x=0, y=0, to_x=1, to_y=1, screenshot=digest),
        act(8, action="done", success=True, message="ok", screenshot=other),
    ]
    ref = EpisodeRef(0, "a::t::t0", "a", "t", 0, "success")
    strip = drill(
        ref, {}, _episode_events(_snap(), _snap(), extra), tmp_path, ShotBudget()
    ).filmstrip
    assert strip is not None
    kept_not, shown, missing = strip.frames
    assert kept_not.seq is None and kept_not.shot.data_uri is None
    assert "was not kept" in (kept_not.shot.note or "")
    assert [a.text for a in kept_not.actions] == ["click at (5, 6) (right button)"]
    assert shown.shot.data_uri is not None and shown.marks == (Mark(1, "drag", 0, 0, 1, 1),)
    assert missing.shot.data_uri is None and missing.sha256 == other
    assert [a.text for a in missing.actions] == ["done: success true, message ok"]


# --------------------------------------------------------------------------- compare


def test_compare_pairs_runs_of_one_plan(fake_runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b, _ = fake_runs
    out = tmp_path / "cmp.html"
    proc = _cli("compare", str(a), str(b), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text("utf-8")
    assert "b:scripted &minus; a:scripted" in html
    assert 'data-arm="a:scripted" data-metric="swer"' in html
    assert 'data-arm="b:scripted" data-metric="swer"' in html
    pairs = re.findall(r"<td class=\"num\">(\d+)/(\d+)</td><td>SWER</td>", html)
    assert pairs == [("4", "4")]
    again = tmp_path / "again.html"
    assert _cli("compare", str(a), str(b), "--out", str(again), cwd=tmp_path).returncode == 0
    assert again.read_bytes() == out.read_bytes()


def test_compare_refuses_runs_whose_plans_differ(
    fake_runs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, _, c = fake_runs
    proc = _cli("compare", str(a), str(c), "--out", str(tmp_path / "x.html"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        (
            f"effectbench: error: cannot pair {a} with {c}: trials per task differ (2 vs 3); "
            "compare runs of the same pack, tasks and trials"
        )
    ]
    assert not (tmp_path / "x.html").exists()


def test_the_model_takes_every_rate_from_metrics_json(mockmed_run: Path) -> None:
    data = load_run(mockmed_run)
    metrics = orjson.loads((mockmed_run / "metrics.json").read_bytes())
    for arm in data.arms:
        block = metrics["arms"][arm.name]["swer"]
        assert (arm.swer.numerator, arm.swer.denominator, arm.swer.value) == (
            block["numerator"], block["denominator"], block["rate"],
        )  # fmt: skip
        assert [arm.swer.lo, arm.swer.hi] == block["ci95"]
    assert data.tasks_total == 9 and len(data.episodes) == 36
    partial = next(t for t in data.tasks if t.task_id == "mockmed::partial")
    assert partial.arms[0].counts[1] == 2  # screen_only: both trials SWER wrong write


def _edit_last_line(run_dir: Path, rehash: bool) -> None:
    """Edit the SWER episode's last line (its terminal event), optionally rehashing it.
    The next line belongs to another episode, so only the check of the link after a
    shown line can see a rehashed edit."""
    log = run_dir / "events.jsonl"
    lines = log.read_bytes().split(b"\n")
    key = f'"ep":"{SWER_EPISODE}"'.encode()
    i = max(n for n, line in enumerate(lines) if key in line)
    assert key not in lines[i + 1]
    line = lines[i].replace(b'"data":{}', b'"data":{"x":1}', 1)
    assert line != lines[i]
    if rehash:
        prev = lines[i - 1][-66:-2]
        h = hashlib.sha256(prev + b"\n" + line[:-72]).hexdigest().encode()
        line = line[:-66] + h + b'"}'
    lines[i] = line
    log.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("rehash", [False, True])
def test_an_edited_line_of_a_shown_episode_is_refused(
    mockmed_run: Path, tmp_path: Path, rehash: bool
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(mockmed_run, copy)
    _edit_last_line(copy, rehash)
    with pytest.raises(ReportError, match="does not chain from the previous line"):
        build_report(copy, tmp_path / "r.html", drill_limit=1, episodes=[SWER_EPISODE])
    assert not (tmp_path / "r.html").exists()


# --------------------------------------------------------------------------- --out and bad runs


@pytest.mark.parametrize("command", ["report", "compare"])
def test_out_never_replaces_a_file_effectbench_did_not_write(
    command: str, fake_runs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, _ = fake_runs
    runs = [str(a)] if command == "report" else [str(a), str(b)]
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    proc = _cli(command, *runs, "--out", str(notes), cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "not written by effectbench" in lines[0], proc.stderr
    assert notes.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no temp file left
    page = tmp_path / "page.html"
    assert _cli(command, *runs, "--out", str(page), cwd=tmp_path).returncode == 0
    first = page.read_bytes()
    proc = _cli(command, *runs, "--out", str(page), cwd=tmp_path)  # its own page: rebuilt
    assert proc.returncode == 0, proc.stderr
    assert page.read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "page.html"]


def _cut(run: Path) -> None:
    log = run / "events.jsonl"
    data = log.read_bytes()
    log.write_bytes(data[: len(data) // 2])


def _random(run: Path) -> None:
    (run / "events.jsonl").write_bytes(hashlib.sha256(b"not a log").digest() * 40)


@pytest.mark.parametrize("damage", [_cut, _random], ids=["cut log", "random bytes"])
def test_compare_refuses_a_run_that_report_refuses(
    damage: Any, fake_runs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b, _ = fake_runs
    bad = tmp_path / "bad"
    shutil.copytree(b, bad)
    (bad / "report.html").unlink()
    damage(bad)
    report = _cli("report", str(bad), cwd=tmp_path)
    assert report.returncode == 2, report.stderr
    out = tmp_path / "cmp.html"
    proc = _cli("compare", str(a), str(bad), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad / "events.jsonl") in lines[0], proc.stderr
    assert not out.exists()
