"""The report in a real headless Chromium: it loads clean and offline, the headline in
the DOM is metrics.json, and a silent wrong effect's drill-down points at the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from chromium import Page, chromium, keep, output_dir

from effectbench.api import evaluate_provider
from effectbench.report.compare import build_compare

pytestmark = pytest.mark.xdist_group("browser")
SWER_EPISODE = "screen_only::mockmed::partial::t0"
"""MockMed's partial save: the screen says saved, the record holds an empty note."""
METRICS = ("swer", "over_halt", "task_success", "screen_success")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = evaluate_provider(
        ["screen_only", "effect_verified"],
        "mockmed",
        trials=2,
        out=tmp_path_factory.mktemp("browser") / "run",
    )
    return run.run_dir


@pytest.fixture(scope="module")
def browser(run_dir: Path) -> Iterator[Any]:
    # after run_dir: Playwright's sync API keeps an event loop running on this thread,
    # and a blocking run refuses to start inside one
    with chromium() as b:
        yield b


def _fmt(block: dict[str, Any]) -> str:
    lo, hi = block["ci95"]
    return (
        f"{block['numerator']}/{block['denominator']} {100 * block['rate']:.1f}% "
        f"[{100 * lo:.1f}%, {100 * hi:.1f}%]"
    )


def test_the_page_loads_offline_without_errors_and_shows_metrics_json(
    browser: Any, run_dir: Path
) -> None:
    p = Page(browser)
    url = p.open(run_dir / "report.html")
    metrics = orjson.loads((run_dir / "metrics.json").read_bytes())
    for arm in metrics["arm_order"]:
        for key in METRICS:
            block = metrics["arms"][arm][key]
            cell = p.page.locator(f'#headline td[data-arm="{arm}"][data-metric="{key}"]')
            assert cell.count() == 1
            assert cell.inner_text() == _fmt(block)
            assert int(cell.get_attribute("data-num")) == block["numerator"]
            assert int(cell.get_attribute("data-den")) == block["denominator"]
            assert float(cell.get_attribute("data-rate")) == block["rate"]
            lo, hi = float(cell.get_attribute("data-lo")), float(cell.get_attribute("data-hi"))
            assert [lo, hi] == block["ci95"]
        gap = p.page.locator(f'#headline td[data-arm="{arm}"][data-metric="gap"]')
        assert float(gap.get_attribute("data-value")) == metrics["arms"][arm]["gap"]["value"]
    assert p.page.locator("#headline svg[role=img]").count() == len(metrics["arm_order"])
    keep(p.page, "report.png")
    p.page.emulate_media(media="print")
    assert not p.page.locator("nav").is_visible()
    p.context.close()
    assert p.errors == []
    assert p.requests == [url]


def test_the_swer_drill_down_highlights_the_wrong_field(browser: Any, run_dir: Path) -> None:
    p = Page(browser)
    url = p.open(run_dir / "report.html")
    details = p.page.locator(f'details[data-episode="{SWER_EPISODE}"]')
    assert details.get_attribute("open") is None
    p.page.locator("#ep-index a", has_text=SWER_EPISODE).click()
    # the page's hashchange handler opens it after the click returns: wait for that event
    # (bounded), rather than reading the attribute in the same instant
    p.page.wait_for_selector(f'details[data-episode="{SWER_EPISODE}"][open]', timeout=10_000)
    assert details.get_attribute("open") is not None
    wrong = details.locator(".f.wrong")
    assert wrong.count() == 1
    assert wrong.get_attribute("data-field") == "note"
    assert wrong.is_visible()
    assert "wrong, expected" in wrong.inner_text()
    style = wrong.evaluate(
        "e => getComputedStyle(e).borderTopColor + ' ' + getComputedStyle(e).borderTopWidth"
    )
    assert style == "rgb(179, 38, 30) 2px"
    others = details.locator(".f:not(.wrong)")
    assert "note" not in [others.nth(i).get_attribute("data-field") for i in range(others.count())]
    assert "must equal" in details.locator(".reasons").inner_text()
    details.scroll_into_view_if_needed()
    path = output_dir() / "report-swer-drilldown.png"
    details.screenshot(path=str(path))
    print(f"screenshot: {path}")
    p.context.close()
    assert p.errors == []
    assert p.requests == [url]


def test_the_comparison_loads_offline_without_errors(
    browser: Any, run_dir: Path, tmp_path: Path
) -> None:
    out = build_compare([run_dir, run_dir], tmp_path / "compare.html")
    p = Page(browser)
    url = p.open(out)
    assert p.page.locator("#paired tbody tr").count() == 6  # 2 arms x (SWER, over-halt, success)
    keep(p.page, "compare.png")
    p.context.close()
    assert p.errors == []
    assert p.requests == [url]
