"""I Hate Money's pages in a real browser, for the harness's browser arms.

The same user path as ``client.LedgerDriver`` and ``client.LedgerReadback``, done by
Chromium in the episode's own browser context, through the episode's fault proxy: sign
in to the project with its login form, open the page with the form, pick each select's
option and tick each checkbox by its label, type the other fields (opening "More
options" first, where the bill type and the receipt link are), keep a screenshot of
the filled form (when the run keeps screenshots), press the form's submit button and
read the flash message the next page shows. A deletion presses the bill's delete button
twice (the page asks "Are you sure?" first). The read opens the same pages as the HTTP
readback and parses what the browser shows with the same parsers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from effectbench.model import JSONScalar, Snapshot
from effectbench.provider import ProductResponse, Telemetry
from effectbench_ihatemoney.client import LIST_VALUE_SEP, TARGET, read_pages
from effectbench_ihatemoney.pages import bill_lines, flash

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

__all__ = ["LedgerBrowserDriver"]

FILLED: Final = "form filled, before submit"
"""The screenshot between filling the form and submitting it (the label the harness's
own browser arms give theirs)."""


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


class LedgerBrowserDriver:
    """One episode's user, signed in to the project once per browser context."""

    def __init__(self, site: str, project: str, password: str) -> None:
        self._site = site
        self._project = project
        self._password = password
        self._signed_in = False

    @property
    def _base(self) -> str:
        return f"{self._site}{self._project}/"

    async def sign_in(self, page: Page) -> None:
        """Sign ``page`` in to the project, for an arm that then works the pages itself
        (the ``computer_use`` arm): its model is never told the password."""
        if self._signed_in:
            return
        await page.goto(self._site + "authenticate")
        await page.fill("input[name='id']", self._project)
        await page.fill("input[name='password']", self._password)
        async with page.expect_navigation():
            await page.click("form:has(input[name='password']) button[type=submit]")
        if not page.url.rstrip("/").endswith(self._project):
            raise RuntimeError(
                f"sign-in to {self._project} failed: {flash(await page.content())[1]}"
            )
        self._signed_in = True

    async def _fill(self, form: Locator, values: Mapping[str, str]) -> None:
        closed = form.locator("details:not([open]) > summary")  # "More options"
        for _ in range(await closed.count()):
            await closed.first.click()
        for name, value in values.items():
            field = form.locator(f"[name='{name}']")
            count = await field.count()
            if count == 0:
                continue
            kind = await field.first.evaluate("e => e.tagName.toLowerCase() + ':' + e.type")
            if kind.startswith("select"):
                await field.select_option(label=value)
            elif kind == "input:checkbox":
                wanted = {v.strip() for v in value.split(LIST_VALUE_SEP)}
                for i in range(count):
                    box = field.nth(i)
                    label = await box.evaluate("e => e.closest('label').textContent.trim()")
                    await box.set_checked(label in wanted)
            else:
                await field.fill(value)

    async def _press(self, page: Page, target: str, values: Mapping[str, str],
                     telemetry: Telemetry) -> None:  # fmt: skip
        if target == "delete":
            await page.goto(self._base)
            rows = [b for b in bill_lines(await page.content()) if b.what == values.get("what")]
            if not rows:
                raise RuntimeError(f"no bill {values.get('what')!r} on the bill list")
            button = page.locator(f"form[action='{rows[0].delete}'] button")
            await button.click()  # the page asks first
            if telemetry.wants_screenshots:
                telemetry.screenshot(await page.screenshot(), FILLED)
            async with page.expect_navigation():
                await button.click()
            return
        await page.goto(self._base + target)
        names = [n for n in values if n != TARGET]
        form = page.locator("form[method='post' i]", has=page.locator(f"[name='{names[0]}']"))
        await self._fill(form.first, {n: values[n] for n in names})
        if telemetry.wants_screenshots:
            telemetry.screenshot(await page.screenshot(), FILLED)
        async with page.expect_navigation():
            await form.first.locator("[type=submit]").first.click()

    async def submit(
        self, page: Page, values: Mapping[str, JSONScalar], telemetry: Telemetry
    ) -> ProductResponse:
        """A page that fails to load (the sign-in, the form or the answer) is not saved."""
        from playwright.async_api import Error as PlaywrightError

        target = str(values.get(TARGET, "add"))
        typed = {k: "" if v is None else str(v) for k, v in values.items()}
        try:
            await self.sign_in(page)
            await self._press(page, target, typed, telemetry)
            saved, message = flash(await page.content())
        except (PlaywrightError, RuntimeError) as exc:
            saved, message = False, f"the page failed: {_one_line(exc)}"
        telemetry.action(
            "submit_form", target=target, status=None, screen_says_saved=saved, channel="browser"
        )
        return ProductResponse(screen_says_saved=saved, status=None, message=message)

    async def read(self, page: Page) -> Snapshot:
        """The bill list, the sidebar and each bill's edit form, as the browser shows them."""
        from playwright.async_api import Error as PlaywrightError

        async def fetch(url: str) -> tuple[int, str]:
            response = await page.goto(url)
            return (0 if response is None else response.status), await page.content()

        try:
            await self.sign_in(page)
            return await read_pages(fetch, self._base, self._project)
        except (PlaywrightError, RuntimeError, ValueError) as exc:
            return Snapshot.unreadable(f"readback failed: {_one_line(exc)}")
