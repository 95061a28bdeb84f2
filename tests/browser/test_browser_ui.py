"""MockMed's pages in a real Chromium: every fault of the full pack shows on screen
exactly as the scripted HTTP form driver sees it, lands the same rows, and the records
page shows what the product's JSON readback returns."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from effectbench_mockmed.packs_full import FULL_TASKS, MockMedFullProvider

from effectbench.arms.browser import FILLED, read_records_page, submit_form_in_browser
from effectbench.browser import BrowserPool
from effectbench.model import Snapshot, resolve_value, trial_params
from effectbench.provider import Telemetry

pytestmark = pytest.mark.anyio


@pytest.fixture
async def pool() -> AsyncIterator[BrowserPool]:
    p = BrowserPool()
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


def _without_source(snapshot: Snapshot) -> dict[str, list[dict[str, object]]]:
    """The rows minus the column that records which path (ui/api) wrote them."""
    return {
        t: [{k: v for k, v in row.items() if k != "source"} for row in rows]
        for t, rows in snapshot.tables.items()
    }


@pytest.mark.timeout(240)
async def test_every_fault_shows_in_the_browser_as_over_http(
    tmp_path: Path, pool: BrowserPool
) -> None:
    provider = MockMedFullProvider(tmp_root=tmp_path)
    await provider.start()
    modes_seen = set()
    try:
        for task in FULL_TASKS:
            if task.solution is None or task.fixture.get("mode") in modes_seen:
                continue
            modes_seen.add(task.fixture.get("mode"))
            params = trial_params(task, 0)
            values = {k: resolve_value(v, params) for k, v in task.solution.items()}
            http = await provider.provision(task, 0, params)
            web = await provider.provision(task, 0, params)
            episode = await pool.open()
            try:
                assert http.env.driver is not None and http.env.verifier is not None
                over_http = await http.env.driver.submit(values)
                telemetry = Telemetry()
                in_browser = await submit_form_in_browser(
                    episode.page, web.env.channels["base_url"], values, telemetry
                )
                where = task.task_id
                assert in_browser.screen_says_saved == over_http.screen_says_saved, where
                assert in_browser.message == over_http.message, where
                assert in_browser.status == over_http.status, where
                labels = [shot.label for shot in telemetry.screenshots]
                assert labels == [FILLED, "after submit"], where
                assert all(shot.png.startswith(b"\x89PNG") for shot in telemetry.screenshots)
                assert [shot.after for shot in telemetry.screenshots] == [0, 1], where
                http_rows, web_rows = await http.oracle.read(), await web.oracle.read()
                assert _without_source(web_rows) == _without_source(http_rows), where
                shown = await read_records_page(episode.page, web.env.channels["base_url"])
                readback = await web.env.verifier.read()  # type: ignore[union-attr]
                assert shown.readable, shown.error
                assert shown.tables == readback.tables, where
            finally:
                await episode.close()
                await http.teardown()
                await web.teardown()
    finally:
        await provider.stop()
    assert {
        "partial",
        "duplicate",
        "optimistic",
        "stale",
        "double",
        "homonym",
        "noop",
    } <= modes_seen


async def test_an_episode_context_starts_empty_and_is_closed(
    tmp_path: Path, pool: BrowserPool
) -> None:
    first = await pool.open()
    await first.page.set_content("<p>one</p>")
    await first.context.add_cookies([{"name": "k", "value": "v", "url": "http://127.0.0.1/"}])
    second = await pool.open()
    try:
        assert await second.context.cookies() == []
        browser = pool.browsers[0]
        assert len(browser.contexts) == 2
        await first.close()
        await first.close()  # idempotent
        assert len(browser.contexts) == 1
    finally:
        await second.close()
    assert pool.browsers[0].contexts == []


@pytest.mark.timeout(120)
async def test_the_screenshot_before_submit_shows_what_was_typed(
    tmp_path: Path, pool: BrowserPool
) -> None:
    """The page after Save shows an empty form; the screenshot taken before it is the
    only one with the typed note. Two fills with the same values give the same image
    and a fill that differs only in the note a different one, so that image shows the
    note (and not, say, a blank form)."""
    provider = MockMedFullProvider(tmp_root=tmp_path)
    await provider.start()
    task = next(t for t in FULL_TASKS if t.task_id == "mockmed::ok")
    params = trial_params(task, 0)
    values = {k: resolve_value(v, params) for k, v in (task.solution or {}).items()}
    shots: list[tuple[bytes, bytes]] = []
    try:
        for note in (values["note"], values["note"], f"{values['note']} (edited)"):
            web = await provider.provision(task, 0, params)
            episode = await pool.open()
            telemetry = Telemetry()
            try:
                await submit_form_in_browser(
                    episode.page, web.env.channels["base_url"], {**values, "note": note}, telemetry
                )
            finally:
                await episode.close()
                await web.teardown()
            filled, after = telemetry.screenshots
            shots.append((filled.png, after.png))
    finally:
        await provider.stop()
    assert shots[0][0] == shots[1][0]  # deterministic
    assert shots[0][0] != shots[2][0]  # the note is in the picture
    assert shots[0][1] == shots[2][1]  # after Save the form is empty again: no note in it
