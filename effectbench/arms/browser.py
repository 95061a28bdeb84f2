"""The two reference baselines, driving the product's pages in a real browser.

``browser_screen_only`` opens the form, fills it with the task's scripted solution,
presses Save and trusts the banner it sees; ``browser_effect_verified`` also opens the
chart's records page before and after, and claims success only when the declared
effect holds in what that page shows. They make the same decisions as their HTTP
twins (``effectbench.arms.baselines``), so on the anchor they must score the same.

They need the harness's ``browser`` channel (``uses_browser = True``) and either the
provider's page mechanics (``EnvHandle.browser_driver``, e.g. Roundup's) or a product
whose base URL serves the form, ``encounters`` as its action and a ``records`` page
(MockMed's conventions, see docs/packs.md). On MockMed's conventions each records a
screenshot of the filled form before it presses Save (the page after the submit shows a
fresh, empty form, so only this one shows what was typed) and one after the submit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from effectbench.arms.capture import page_png
from effectbench.core.arm import TaskView
from effectbench.core.model import AgentReport, JSONScalar, Row, Snapshot, TrueState
from effectbench.core.provider import EnvHandle, ProductResponse, Telemetry
from effectbench.scoring.judge import judge

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = [
    "FILLED",
    "BrowserEffectVerifiedArm",
    "BrowserScreenOnlyArm",
    "read_records_page",
    "submit_form_in_browser",
]

NO_BROWSER: Final = "no browser page: the harness gave this episode no browser channel"
NO_SCRIPT: Final = "no scripted action: the task offers no solution"
RECORDS_PAGE: Final = "records"
FILLED: Final = "form filled, before submit"
"""The label of the screenshot taken between filling the form and pressing Save."""
_FIELDS_JS: Final = "els => els.map(e => [e.name, e.tagName.toLowerCase()])"
_ROWS_JS: Final = """table => Array.from(table.tBodies[0].rows, tr => Object.fromEntries(
  Array.from(tr.cells, td => [td.dataset.field,
    td.dataset.null ? null : td.dataset.num ? Number(td.textContent) : td.textContent])))"""


def _halt(message: str) -> AgentReport:
    return AgentReport(reported_success=False, halted=True, message=message)


async def _fill(page: Page, values: Mapping[str, JSONScalar]) -> None:
    """Choose each select's option and type each text field, as a person would."""
    tags = dict(await page.eval_on_selector_all("form [name]", _FIELDS_JS))
    for name, value in values.items():
        text = "" if value is None else str(value)
        field = page.locator(f"form [name='{name}']")
        if tags.get(name) == "select":
            await field.select_option(value=text)
        elif name in tags:
            await field.fill(text)


async def submit_form_in_browser(
    page: Page, base_url: str, values: Mapping[str, JSONScalar], telemetry: Telemetry
) -> ProductResponse:
    """Open the form, fill it, press Save, and read the banner the next page shows. A
    page that fails to load is an error page: not saved. Screenshots (when kept): the
    filled form before Save, then the page after it."""
    from playwright.async_api import Error as PlaywrightError

    status: int | None = None
    try:
        await page.goto(base_url)
        await _fill(page, values)
        if telemetry.wants_screenshots:
            telemetry.screenshot(await page_png(page), FILLED)
        async with page.expect_navigation() as nav:
            await page.click("form button[type=submit]")
        response = await nav.value
        status = None if response is None else response.status
        banner = page.locator("#banner")
        if await banner.count() == 0:
            saved, message = False, ""
        else:
            saved = (await banner.get_attribute("class") or "").split() == ["saved"]
            message = (await banner.text_content() or "").strip()
    except PlaywrightError as exc:
        saved, message = False, f"the page failed: {' '.join(str(exc).split())[:200]}"
    telemetry.action("submit_form", status=status, screen_says_saved=saved, channel="browser")
    if telemetry.wants_screenshots:
        telemetry.screenshot(await page_png(page), "after submit")
    return ProductResponse(screen_says_saved=saved, status=status, message=message)


async def read_records_page(page: Page, base_url: str) -> Snapshot:
    """The chart's records as its page shows them, one row per table row."""
    from playwright.async_api import Error as PlaywrightError

    try:
        response = await page.goto(base_url + RECORDS_PAGE)
        if response is None or response.status != 200:
            status = None if response is None else response.status
            return Snapshot.unreadable(f"the records page answered HTTP {status}")
        table = await page.query_selector("table#records")
        if table is None:
            return Snapshot.unreadable("the records page shows no records table")
        name = await table.get_attribute("data-table") or "records"
        raw: list[dict[str, Any]] = await table.evaluate(_ROWS_JS)
    except PlaywrightError as exc:
        return Snapshot.unreadable(f"the records page failed: {' '.join(str(exc).split())[:200]}")
    rows: tuple[Row, ...] = tuple(dict(r) for r in raw)
    return Snapshot(readable=True, tables={name: rows})


def _base_url(env: EnvHandle) -> str:
    return env.channels.get("web_url") or env.channels["base_url"]


async def _submit(env: EnvHandle, page: Page, values: Mapping[str, JSONScalar]) -> ProductResponse:
    """Through the provider's page mechanics when it has them, else MockMed's conventions;
    a screenshot after the submit either way."""
    driver = env.browser_driver
    if driver is None:
        return await submit_form_in_browser(page, _base_url(env), values, env.telemetry)
    response = await driver.submit(page, values, env.telemetry)
    if env.telemetry.wants_screenshots:
        env.telemetry.screenshot(await page_png(page), "after submit")
    return response


async def _read(env: EnvHandle, page: Page) -> Snapshot:
    driver = env.browser_driver
    if driver is None:
        return await read_records_page(page, _base_url(env))
    return await driver.read(page)


class BrowserScreenOnlyArm:
    """Fills and submits the form in a browser; reports success exactly when the banner
    says saved, else halts."""

    name: str = "browser_screen_only"
    uses_browser: bool = True

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        if env.browser is None:
            return _halt(NO_BROWSER)
        if task.solution is None:
            return _halt(NO_SCRIPT)
        response = await _submit(env, env.browser, task.solution)
        if response.screen_says_saved:
            return AgentReport(
                reported_success=True,
                halted=False,
                message=f"screen says saved: {response.message}",
            )
        return _halt(
            f"screen did not confirm the save (status {response.status}): {response.message}"
        )


class BrowserEffectVerifiedArm:
    """Submits in a browser, then opens the records page and claims success only when the
    declared effect holds between what it showed before and after."""

    name: str = "browser_effect_verified"
    uses_browser: bool = True

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        page = env.browser
        if page is None:
            return _halt(NO_BROWSER)
        if task.solution is None:
            return _halt(NO_SCRIPT)
        if task.effect is None:
            await _submit(env, page, task.solution)
            return _halt("acted but cannot verify: the task declares no effect to check")
        before = await _read(env, page)
        await _submit(env, page, task.solution)
        after = await _read(env, page)
        verdict = judge(task.effect, before, after)
        if verdict.true_state is TrueState.CORRECT:
            return AgentReport(
                reported_success=True,
                halted=False,
                message="the records page confirms the declared effect",
            )
        detail = "; ".join(verdict.reasons) or verdict.true_state.value
        return _halt(
            f"the records page does not confirm the effect ({verdict.true_state.value}): {detail}"
        )
