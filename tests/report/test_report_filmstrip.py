"""The report replays a browser episode: its filmstrip, from a real Chromium run of the
browser arms on MockMed, starts at the filled form the log recorded before Save, steps
with previous/next offline, and shows a frame whose image is gone or not the one its
hash names as missing, with the reason, never as a picture."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import Page, chromium, keep
from report_html import filmstrip
from run_files import log_events

from effectbench.api import evaluate
from effectbench.arms.browser import FILLED
from effectbench.core import events as ev
from effectbench.report import build_report

pytestmark = [pytest.mark.xdist_group("browser"), pytest.mark.timeout(300)]
ARMS = ["browser_screen_only", "browser_effect_verified"]
EPISODE = "browser_screen_only::mockmed::ok::t0"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("film") / "run"
    run = evaluate(ARMS, trials=1, task_globs=["mockmed::ok", "mockmed::partial"], out=out)
    return run.run_dir


@pytest.fixture(scope="module")
def browser(run_dir: Path) -> Iterator[Any]:
    with chromium() as b:  # after run_dir: a blocking run refuses Playwright's loop
        yield b


def _acted(run_dir: Path, episode: str) -> list[dict[str, Any]]:
    """The episode's screenshots and actions, in log order."""
    kinds = (ev.ArmScreenshot.TYPE, ev.ArmAction.TYPE)
    return [e for e in log_events(run_dir) if e["ep"] == episode and e["type"] in kinds]


def test_a_browser_episode_starts_at_the_filled_form_logged_before_submit(run_dir: Path) -> None:
    for arm in ARMS:
        episode = f"{arm}::mockmed::ok::t0"
        acted = _acted(run_dir, episode)
        submit = next(i for i, e in enumerate(acted) if e["type"] == ev.ArmAction.TYPE)
        filled = acted[submit - 1]  # the log: the filled form, then the submit
        assert filled["type"] == ev.ArmScreenshot.TYPE and filled["data"]["label"] == FILLED
        assert acted[submit]["data"]["kind"] == "submit_form"
        frames = filmstrip(run_dir / "report.html", episode)
        shots = [e for e in acted if e["type"] == ev.ArmScreenshot.TYPE]
        assert len(frames) == len(shots) >= 2, episode
        first = frames[0]
        assert first.attrs["data-sha256"] == filled["data"]["sha256"]
        assert first.attrs["data-seq"] == str(filled["seq"])
        assert first.image_sha256 == filled["data"]["sha256"]  # that very image is shown
        assert [kind for kind, _ in first.actions] == ["submit_form"]
        assert [f.image_sha256 for f in frames] == [s["data"]["sha256"] for s in shots]


def test_previous_and_next_step_through_the_frames_offline(browser: Any, run_dir: Path) -> None:
    p = Page(browser)
    url = p.open(run_dir / "report.html")
    details = p.page.locator(f'details[data-episode="{EPISODE}"]')
    details.locator("summary").click()
    strip = details.locator(".filmstrip")
    frames = strip.locator(".fs-frame")
    assert frames.count() == 2
    pos, prev, nxt = strip.locator(".fs-pos"), strip.locator(".fs-prev"), strip.locator(".fs-next")
    assert frames.nth(0).is_visible() and not frames.nth(1).is_visible()
    assert pos.inner_text() == "frame 1 of 2" and prev.is_disabled()
    assert frames.nth(0).locator("img").evaluate("i => i.complete && i.naturalWidth") > 0
    nxt.click()
    assert not frames.nth(0).is_visible() and frames.nth(1).is_visible()
    assert pos.inner_text() == "frame 2 of 2" and nxt.is_disabled()
    keep(p.page, "report-filmstrip.png")
    prev.click()
    assert frames.nth(0).is_visible() and pos.inner_text() == "frame 1 of 2"
    p.page.emulate_media(media="print")  # a printout has every frame
    assert frames.nth(1).is_visible()
    p.context.close()
    assert p.errors == []
    assert p.requests == [url]


def test_a_missing_or_mismatched_image_is_a_frame_that_says_why(
    run_dir: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "edited"
    shutil.copytree(run_dir, copy)
    before = filmstrip(copy / "report.html", EPISODE)
    filled, after = (copy / f"blobs/sha256/{f.attrs['data-sha256']}.png" for f in before)
    after.unlink()  # the image after Save is gone
    filled.write_bytes((run_dir / after.relative_to(copy)).read_bytes())  # another, valid image
    build_report(copy)
    frames = filmstrip(copy / "report.html", EPISODE)
    assert [f.attrs["data-sha256"] for f in frames] == [f.attrs["data-sha256"] for f in before]
    assert [f.image_sha256 for f in frames] == [None, None]
    assert "does not match its content hash" in frames[0].attrs["data-missing"]
    assert "not found" in frames[1].attrs["data-missing"]
    assert frames[0].actions == before[0].actions  # the actions are still replayed
