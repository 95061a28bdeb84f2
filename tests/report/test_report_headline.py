"""The report's plain-words headline and its count drill-down, in a real headless Chromium:
the headline names the arm metrics.json's paired comparison favours, every count opens
the list of its episodes, an entry opens the episode's drill-down, and at 420 px wide
nothing scrolls sideways (report.html and compare.html)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from chromium import Page, chromium, keep

from effectbench.api import evaluate_provider
from effectbench.report.compare import build_compare
from effectbench.report.lists import list_anchor

pytestmark = pytest.mark.xdist_group("browser")
ARMS = ["screen_only", "effect_verified"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # three trials: a comparison needs three paired trials per task to name a better arm
    run = evaluate_provider(
        ARMS, "mockmed", trials=3, out=tmp_path_factory.mktemp("headline") / "run"
    )
    return run.run_dir


@pytest.fixture(scope="module")
def compare_page(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_compare([run_dir, run_dir], tmp_path_factory.mktemp("cmp") / "compare.html")


@pytest.fixture(scope="module")
def browser(run_dir: Path, compare_page: Path) -> Iterator[Any]:
    with chromium() as b:  # after the run: Playwright's sync API holds this thread's loop
        yield b


def _results(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in (run_dir / "results.jsonl").read_bytes().splitlines() if x]


def _words(text: str) -> str:
    return " ".join(text.replace("**", "").split())


def test_the_headline_names_the_better_arm_from_the_paired_comparison(
    browser: Any, run_dir: Path
) -> None:
    metrics = orjson.loads((run_dir / "metrics.json").read_bytes())
    (c,) = metrics["comparisons"]
    lo, hi = c["swer"]["ci95"]
    assert lo > 0  # screen_only - effect_verified: effect_verified's SWER is lower
    p = Page(browser)
    url = p.open(run_dir / "report.html")
    first = p.page.locator("main > section").first
    assert first.get_attribute("id") == "summary"
    swer = p.page.locator('#summary .verdicts li[data-metric="swer"]')
    assert swer.get_attribute("data-better") == "effect_verified"
    text = swer.inner_text()
    assert "On SWER, effect_verified is better" in text
    assert f"[{100 * lo:+.1f}, {100 * hi:+.1f}]" in text
    halt = p.page.locator('#summary .verdicts li[data-metric="over_halt"]')
    assert halt.get_attribute("data-better") == ""
    assert "neither arm is shown better" in halt.inner_text()
    summary = p.page.locator("#summary").inner_text()
    assert "Silent Wrong-Effect Rate" in summary
    terms = p.page.locator("#summary dl.defs dt").all_inner_texts()
    for term in ("SWER", "over-halt", "task success", "screen success", "gap"):
        assert any(t.startswith(term) for t in terms), term
    # the fixture warning is summary.md's, word for word
    md = (run_dir / "summary.md").read_text("utf-8")
    para = next(b for b in md.split("\n\n") if "fixture invariants" in b)
    assert _words(p.page.locator("#fixture-warning").inner_text()) == _words(para)
    p.context.close()
    assert p.errors == []
    assert p.requests == [url]


def test_a_count_opens_its_episodes_and_an_entry_its_drill_down(
    browser: Any, run_dir: Path
) -> None:
    rows = _results(run_dir)
    swer_ids = sorted(
        r["episode_id"]
        for r in rows
        if r["arm"] == "screen_only" and r["outcome"] == "SILENT_WRONG_EFFECT"
    )
    p = Page(browser)
    p.open(run_dir / "report.html")
    cell = p.page.locator('#headline td[data-arm="screen_only"][data-metric="swer"]')
    cell.locator("a.cnt").first.click()
    target = list_anchor("screen_only", "swer")
    listed = p.page.locator(f'details.eplist[id="{target}"]')
    p.page.wait_for_selector(f'details.eplist[id="{target}"][open]', timeout=10_000)
    links = listed.locator("a[data-episode]")
    assert sorted(links.evaluate_all("ls => ls.map(a => a.dataset.episode)")) == swer_ids
    assert links.count() == int(cell.get_attribute("data-num"))
    episode = links.first.get_attribute("data-episode")
    links.first.click()
    p.page.wait_for_selector(f'details.ep[data-episode="{episode}"][open]', timeout=10_000)
    assert "SWER" in p.page.locator(f'details.ep[data-episode="{episode}"] summary').inner_text()
    # a count of the per-task table opens that task's list
    task = "mockmed::ok"
    ok = [r for r in rows if r["arm"] == "effect_verified" and r["task_id"] == task]
    href = "#" + list_anchor("effect_verified", "task_success", task=task)
    p.page.locator(f'#tasks a.cnt[href="{href}"]').click()
    p.page.wait_for_selector(f'details.eplist[id="{href[1:]}"][open]', timeout=10_000)
    got = p.page.locator(f'details.eplist[id="{href[1:]}"] a[data-episode]')
    want = sorted(r["episode_id"] for r in ok if r["outcome"] == "SUCCESS")
    assert sorted(got.evaluate_all("ls => ls.map(a => a.dataset.episode)")) == want
    p.context.close()
    assert p.errors == []


def _narrow(browser: Any, page: Path, name: str) -> None:
    ctx = browser.new_context(viewport={"width": 420, "height": 900})
    tab = ctx.new_page()
    tab.goto(page.resolve().as_uri(), wait_until="load")
    width = tab.evaluate("document.scrollingElement.scrollWidth")
    assert width <= tab.evaluate("innerWidth")
    box = tab.locator("#summary").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 420
    assert tab.evaluate(
        "(() => { const s = document.getElementById('summary');"
        " return s.scrollWidth <= s.clientWidth; })()"
    )
    keep(tab, name)
    tab.emulate_media(media="print")
    assert tab.locator("#summary").is_visible()
    assert not tab.locator("#lists").is_visible()
    assert not tab.locator("nav").is_visible()
    ctx.close()


def test_at_420_px_the_headline_does_not_scroll_sideways(
    browser: Any, run_dir: Path, compare_page: Path
) -> None:
    _narrow(browser, run_dir / "report.html", "report-420.png")
    _narrow(browser, compare_page, "compare-420.png")


def test_the_comparison_has_the_headline_and_the_drill_down(
    browser: Any, compare_page: Path
) -> None:
    p = Page(browser)
    url = p.open(compare_page)
    assert p.page.locator("main > section").first.get_attribute("id") == "summary"
    verdicts = p.page.locator('#summary .verdicts li[data-metric="swer"]')
    assert verdicts.count() == 2  # R2 - R1 for each of the two arms
    assert re.search(r"R2:screen_only .* R1:screen_only", verdicts.first.inner_text())
    cell = p.page.locator('#headline td[data-arm="R2:screen_only"][data-metric="swer"]')
    cell.locator("a.cnt").first.click()
    target = list_anchor("R2:screen_only", "swer")
    p.page.wait_for_selector(f'details.eplist[id="{target}"][open]', timeout=10_000)
    entry = p.page.locator(f'details.eplist[id="{target}"] a[data-episode]').first
    assert entry.get_attribute("href", timeout=1_000).startswith("#R2/ep")
    episode = entry.get_attribute("data-episode")
    entry.click()
    opened = f'details.ep[id="{entry.get_attribute("href")[1:]}"][open]'
    p.page.wait_for_selector(opened, timeout=10_000)
    assert p.page.locator(opened).get_attribute("data-episode") == episode
    p.context.close()
    assert p.errors == []
    assert p.requests == [url]
