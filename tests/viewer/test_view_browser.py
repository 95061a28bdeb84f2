"""The viewer in a real headless Chromium: from the index, a run's count opens the list
of exactly its episodes, and an episode opens its drill-down; served and from disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from chromium import Page, chromium, keep
from view_runs import served, swer_episodes, view_folder

from effectbench.testing.cli import run_cli

pytestmark = pytest.mark.xdist_group("browser")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return view_folder(tmp_path_factory.mktemp("viewb"))


@pytest.fixture(scope="module")
def browser(runs: Path) -> Iterator[Any]:
    with chromium() as b:
        yield b


def _count_link(p: Page, run: str) -> Any:
    return p.page.locator(f'tr[data-run="{run}"][data-arm="screen_only"] td[data-metric="swer"] a')


def _visible_episodes(p: Page) -> list[str]:
    rows = p.page.locator("#episodes tbody tr:visible")
    return [rows.nth(i).locator("td").first.inner_text().split()[0] for i in range(rows.count())]


def _click_through(p: Page, runs: Path) -> None:
    """Index -> a's screen_only SWER count -> its episodes -> the first one's drill-down."""
    metrics = orjson.loads((runs / "a" / "metrics.json").read_bytes())
    swer = metrics["arms"]["screen_only"]["swer"]
    link = _count_link(p, "a")
    assert link.inner_text().startswith(f"{swer['numerator']}/{swer['denominator']} ")
    link.click()
    p.page.wait_for_url("**/a/episodes.html?arm=screen_only&outcome=SWER")
    expected = swer_episodes(runs / "a", "screen_only")
    assert len(expected) == swer["numerator"] > 0
    assert _visible_episodes(p) == expected
    first = p.page.locator("#episodes tbody tr:visible a.drill").first
    first.click()
    p.page.wait_for_url("**/a/report.html#ep*")
    anchor = p.page.url.rsplit("#", 1)[1]
    opened = p.page.locator(f"details#{anchor}")
    assert opened.get_attribute("data-episode") == expected[0]
    assert opened.evaluate("d => d.open") is True


def test_served_a_count_opens_its_episodes_and_an_episode_its_drill_down(
    browser: Any, runs: Path
) -> None:
    with served(runs) as (_, url):
        p = Page(browser)
        p.page.goto(url, wait_until="load")
        p.page.locator('#runs th[data-key="swer"] button').click()
        keep(p.page, "view-index.png")
        _click_through(p, runs)
        p.context.close()
        assert p.errors == []
        assert all(r.startswith(url) for r in p.requests)


def test_static_a_count_opens_its_episodes_and_an_episode_its_drill_down(
    browser: Any, runs: Path
) -> None:
    assert run_cli("view", str(runs), "--static").returncode == 0
    p = Page(browser)
    p.open(runs / "index.html")
    _click_through(p, runs)
    p.context.close()
    assert p.errors == []
    assert all(r.startswith("file://") for r in p.requests)


def test_the_index_sorts_and_filters(browser: Any, runs: Path) -> None:
    assert run_cli("view", str(runs), "--static").returncode == 0
    p = Page(browser)
    p.open(runs / "index.html")
    p.page.locator('#runs th[data-key="swer"] button').click()
    rates = p.page.locator('#runs tbody tr:visible td[data-metric="swer"]')
    values = [float(rates.nth(i).get_attribute("data-sort")) for i in range(rates.count())]
    assert values == sorted(values) and len(values) == 5
    p.page.locator("#run-filter").fill("sweep")
    assert p.page.locator("#runs tbody tr:visible").count() == 1
    p.context.close()
    assert p.errors == []
