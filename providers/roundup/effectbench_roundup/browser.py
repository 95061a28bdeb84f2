"""Roundup's pages in a real browser, for the harness's browser arms.

The same user path as ``client.TrackerDriver`` and ``client.IssueReadback``, but done by
Chromium in the episode's own browser context, through the episode's fault proxy: log
in with the login form, open the item form, choose each select's option by its label
and type each text field, keep a screenshot of the filled form (when the run keeps
screenshots), press the form's submit button, and read the banner the next page shows.
The readback opens the issue list and each issue's page and parses what the browser
shows with the same parsers. Nothing here decides what to trust: that is the arm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from effectbench.model import JSONScalar, Row, Snapshot
from effectbench.provider import ProductResponse, Telemetry
from effectbench_roundup.client import TARGET, issue_row
from effectbench_roundup.pages import banner

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = ["RoundupBrowserDriver"]

_ITEM_FORM: Final = "form:has([name='@note'])"
_FIELDS_JS: Final = "els => els.map(e => [e.name, e.tagName.toLowerCase()])"
_IDS_JS: Final = """() => Array.from(new Set(Array.from(document.querySelectorAll('a[href]'),
  a => (a.getAttribute('href').match(/^issue(\\d+)$/) || [])[1]).filter(Boolean))).map(Number)"""
_INDEX: Final = "issue?@columns=id,title&@pagesize=500&@sort=id&@filter="
FILLED: Final = "form filled, before submit"
"""The screenshot between filling the item form and submitting it (the label the
harness's own browser arms give theirs)."""


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


class RoundupBrowserDriver:
    """One episode's user, logged in once per browser context."""

    def __init__(self, base_url: str, user: str, password: str) -> None:
        self._base = base_url
        self._user, self._password = user, password
        self._logged_in = False

    async def _login(self, page: Page) -> None:
        if self._logged_in:
            return
        await page.goto(self._base)
        await page.fill("input[name='__login_name']", self._user)
        await page.fill("input[name='__login_password']", self._password)
        async with page.expect_navigation():
            # input[value=Login] alone first matches the hidden @action input
            await page.click("input[type=submit][value=Login]")
        saved, message = banner(await page.content())
        if not saved:
            raise RuntimeError(f"login as {self._user} failed: {message or 'no welcome banner'}")
        self._logged_in = True

    async def sign_in(self, page: Page) -> None:
        """Log ``page`` in as the episode's user, for an arm that then works the pages
        itself (the ``computer_use`` arm): its model is never told the password."""
        await self._login(page)

    async def _fill(self, page: Page, values: Mapping[str, JSONScalar]) -> None:
        form = page.locator(_ITEM_FORM)
        tags = dict(await form.locator("[name]").evaluate_all(_FIELDS_JS))
        for name, value in values.items():
            if name == TARGET or name not in tags:
                continue
            text = "" if value is None else str(value)
            field = form.locator(f"[name='{name}']")
            if tags[name] == "select":
                await field.select_option(label=text)
            else:
                await field.fill(text)

    async def submit(
        self, page: Page, values: Mapping[str, JSONScalar], telemetry: Telemetry
    ) -> ProductResponse:
        """A page that fails to load (the login, the form or the answer) is not saved."""
        from playwright.async_api import Error as PlaywrightError

        target = str(values.get(TARGET, "issue"))
        status: int | None = None
        try:
            await self._login(page)
            await page.goto(self._base + (target if target != "issue" else "issue?@template=item"))
            await self._fill(page, values)
            if telemetry.wants_screenshots:  # the next page's form is empty: keep what was typed
                telemetry.screenshot(await page.screenshot(), FILLED)
            async with page.expect_navigation() as nav:
                await page.click(f"{_ITEM_FORM} [type=submit]")
            response = await nav.value
            status = None if response is None else response.status
            saved, message = banner(await page.content())  # the banner, as the web driver
        except (PlaywrightError, RuntimeError) as exc:
            saved, message = False, f"the page failed: {_one_line(exc)}"
        telemetry.action(
            "submit_form", target=target, status=status, screen_says_saved=saved, channel="browser"
        )
        return ProductResponse(screen_says_saved=saved, status=status, message=message)

    async def read(self, page: Page) -> Snapshot:
        """The issue list, then each issue's page, as the browser shows them."""
        from playwright.async_api import Error as PlaywrightError

        try:
            await self._login(page)
            response = await page.goto(self._base + _INDEX)
            if response is None or response.status != 200:
                code = None if response is None else response.status
                return Snapshot.unreadable(f"the issue list answered HTTP {code}")
            ids: list[int] = sorted(await page.evaluate(_IDS_JS))
            issues: list[Row] = []
            msgs: list[Row] = []
            for issue_id in ids:
                response = await page.goto(f"{self._base}issue{issue_id}")
                if response is None or response.status != 200:
                    code = None if response is None else response.status
                    return Snapshot.unreadable(f"issue{issue_id} answered HTTP {code}")
                row, notes = issue_row(issue_id, await page.content())
                issues.append(row)
                msgs.extend(notes)
        except (PlaywrightError, RuntimeError) as exc:
            return Snapshot.unreadable(f"readback failed: {_one_line(exc)}")
        msgs.sort(key=lambda r: int(str(r["id"])))
        return Snapshot(readable=True, tables={"issue": tuple(issues), "msg": tuple(msgs)})
