"""A protocol agent's screenshots are evidence: a real ``exec-each+browser:`` agent over
real Chromium asks the harness for screenshots of its page (``screenshot``), is told the
page's viewport, and ``--screenshots`` captures after its actions and at its report;
each image is stored once by content hash and logged, ``verify`` holds the run to it (a
tampered or missing PNG is not sound), and the report's filmstrip replays it. A hostile
agent can neither flood the run with them nor name another episode's page."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from report_html import filmstrip
from run_files import log_events

from effectbench.agents import ExecArm
from effectbench.agents.reference import CDP_AGENT
from effectbench.agents.shots import FINAL_LABEL, MAX_SHOTS, MAX_WAITING, NO_BROWSER
from effectbench.api import evaluate
from effectbench.core import events as ev
from effectbench.testing import run_cli

pytestmark = [pytest.mark.xdist_group("browser"), pytest.mark.timeout(300)]
AGENT = Path(__file__).resolve().parents[1] / "agents" / "screenshot_agent.py"
TASK = ["mockmed::ok"]
CAPPED = MAX_SHOTS + 5
FLOOD = 12 * MAX_WAITING


def _arm(name: str, *mode: str, browser: bool = True) -> ExecArm:
    argv = [sys.executable, str(AGENT), str(CDP_AGENT), *mode]
    return ExecArm(argv, name=name, mode="per_episode", browser=browser)


def _run(out: Path, arms: list[ExecArm], screenshots: str = "all") -> Path:
    run = evaluate(arms, trials=1, task_globs=TASK, out=out, screenshots=screenshots)
    return run.run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    arms = [
        _arm("shots", "evidence"),
        _arm("capped", "many", str(CAPPED)),
        _arm("flood", "flood", str(FLOOD)),
        _arm("forged", "forged"),
        _arm("blind", "many", "1", browser=False),
    ]
    return _run(tmp_path_factory.mktemp("shots") / "run", arms)


def _episode(run_dir: Path, arm: str) -> list[dict[str, Any]]:
    return [e for e in log_events(run_dir) if e["ep"] == f"{arm}::mockmed::ok::t0"]


def _said(events: list[dict[str, Any]]) -> Any:
    (reported,) = [e for e in events if e["type"] == ev.Reported.TYPE]
    return orjson.loads(reported["data"]["message"])


def _shots(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == ev.ArmScreenshot.TYPE]


def test_the_agent_is_told_its_viewport_and_answered_with_the_hash_the_log_cites(
    run_dir: Path,
) -> None:
    events = _episode(run_dir, "shots")
    said = _said(events)
    viewport = said["viewport"]
    assert viewport == {"width": 1024, "height": 720, "device_scale_factor": 1.0}
    filled, saved = said["answers"]
    assert filled["ok"] and filled["kept"] and filled["label"] == "agent: filled form"
    assert filled["image_sha256"] == filled["sha256"]  # the image it was sent is the one hashed
    scale = viewport["device_scale_factor"]
    size = [round(viewport["width"] * scale), round(viewport["height"] * scale)]
    assert filled["image_size"] == size == [filled["width"], filled["height"]]
    assert saved["ok"] and "image_sha256" not in saved  # no image unless asked for
    shots = _shots(events)
    labels = [s["data"]["label"] for s in shots]
    assert labels == ["agent: filled form", "after action 1 (click)", "agent: saved", FINAL_LABEL]
    by_label = {s["data"]["label"]: s["data"] for s in shots}
    assert by_label["agent: filled form"]["sha256"] == filled["sha256"]
    assert by_label["agent: saved"]["sha256"] == saved["sha256"]
    kinds = [e["type"] for e in events if e["type"] in (ev.ArmScreenshot.TYPE, ev.ArmAction.TYPE)]
    assert kinds[:3] == [ev.ArmScreenshot.TYPE, ev.ArmAction.TYPE, ev.ArmScreenshot.TYPE]
    for shot in shots:  # each stored once under its content hash
        blob = (run_dir / shot["data"]["path"]).read_bytes()
        assert hashlib.sha256(blob).hexdigest() == shot["data"]["sha256"]


def test_the_report_s_filmstrip_replays_the_agent_s_frames(run_dir: Path) -> None:
    events = _episode(run_dir, "shots")
    shots = _shots(events)
    (click,) = [e for e in events if e["type"] == ev.ArmAction.TYPE]
    done = run_cli("report", str(run_dir), "--episode", "shots::mockmed::ok::t0", timeout=120)
    assert done.returncode == 0, done.stderr
    frames = filmstrip(run_dir / "report.html", "shots::mockmed::ok::t0")
    assert [f.image_sha256 for f in frames] == [s["data"]["sha256"] for s in shots]
    first = frames[0]  # the filled form, with the click drawn where the agent clicked
    assert [kind for kind, _ in first.actions] == ["click"]
    (mark,) = first.marks
    x, y = click["data"]["detail"]["x"], click["data"]["detail"]["y"]
    assert (round(float(mark["cx"])), round(float(mark["cy"]))) == (round(x), round(y))


def test_verify_holds_the_run_to_every_agent_screenshot(run_dir: Path, tmp_path: Path) -> None:
    done = run_cli("verify", str(run_dir), timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 3 and "INCOMPLETE" in said, said  # sound; the hostile arms score none
    shots = _shots(_episode(run_dir, "shots"))
    for how, why in (("edited", "does not match its hash"), ("missing", "is missing")):
        copy = tmp_path / how
        shutil.copytree(run_dir, copy)
        blob = copy / shots[0]["data"]["path"]
        if how == "edited":
            blob.write_bytes(blob.read_bytes()[:-8] + b"tampered")
        else:
            blob.unlink()
        done = run_cli("verify", str(copy), timeout=120)
        said = done.stdout + done.stderr
        assert done.returncode == 1 and f"{shots[0]['data']['path']} {why}" in said, said


def test_screenshots_per_episode_are_capped(run_dir: Path) -> None:
    events = _episode(run_dir, "capped")
    answers = _said(events)
    assert [ok for ok, _ in answers] == [True] * MAX_SHOTS + [False] * (CAPPED - MAX_SHOTS)
    assert all("cap is reached" in why for _, why in answers[MAX_SHOTS:])
    assert len(_shots(events)) == MAX_SHOTS + 1  # and the one at its report


def test_a_flood_of_unread_requests_fails_only_that_episode(run_dir: Path) -> None:
    events = _episode(run_dir, "flood")
    (failed,) = [e for e in events if e["type"] == "episode.failed"]
    assert failed["data"]["failure_class"] == "agent"
    assert f"more than {MAX_WAITING} screenshot requests waiting" in failed["data"]["error"]
    assert len(_shots(events)) <= MAX_WAITING


def test_an_agent_cannot_ask_for_another_episode_s_page(run_dir: Path) -> None:
    events = _episode(run_dir, "forged")
    (failed,) = [e for e in events if e["type"] == "episode.failed"]
    forged = "'screenshot' message for unknown episode 'forged::mockmed::ok::t1'"
    assert forged in failed["data"]["error"]
    assert [s["data"]["label"] for s in _shots(events)] == ["agent: own page"]
    logged = {e["ep"] for e in log_events(run_dir) if e["type"] == ev.ArmScreenshot.TYPE}
    assert not [ep for ep in logged if ep.endswith("::t1")]


def test_an_agent_without_a_browser_is_told_so(run_dir: Path) -> None:
    events = _episode(run_dir, "blind")
    assert _said(events) == [[False, NO_BROWSER]]
    assert not _shots(events)


def test_screenshots_none_refuses_and_final_keeps_only_the_report_s(tmp_path: Path) -> None:
    for policy in ("none", "final"):
        run_dir = _run(tmp_path / policy, [_arm("shots", "evidence")], policy)
        events = _episode(run_dir, "shots")
        answers = _said(events)["answers"]
        shots = _shots(events)
        if policy == "none":
            assert all(not a["ok"] and "--screenshots none" in a["error"] for a in answers)
            assert not shots and not (run_dir / "blobs").exists()
        else:
            assert all(a["ok"] and not a["kept"] for a in answers)
            assert [s["data"]["label"] for s in shots] == [FINAL_LABEL]
