"""The arm-facing channels into Roundup: a web driver and the product's own readback.

Both speak HTTP to the tracker *through the episode's fault proxy*, as a browser user
would: log in with the login form's one-shot ``@csrf`` token, open the item form (a
fresh token, ``@lastactivity``), post it as ``multipart/form-data``, follow the
redirect and read the banner. Neither holds a path to the database.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Final

import aiohttp

from effectbench.model import JSONScalar, Row, Snapshot
from effectbench.provider import ProductResponse, Telemetry
from effectbench_roundup.pages import PageForm, banner, forms, selected_options, text_inputs

__all__ = ["TARGET", "IssueReadback", "TrackerDriver"]

TARGET: Final = "@target"
"""The solution key naming the form to submit: ``issue`` (a new issue) or ``issue<N>``."""
_MESSAGE: Final = re.compile(
    r'<a href="msg(\d+)">msg\d+ \(view\)</a>.*?<pre>(.*?)</pre>', re.DOTALL
)
_ISSUE_LINK: Final = re.compile(r'href="issue(\d+)"')
_NO_SELECTION: Final = "- no selection -"


class _Browser:
    """One user's cookie-holding session against the tracker's base URL."""

    def __init__(
        self, session: aiohttp.ClientSession, base_url: str, user: str, password: str
    ) -> None:
        self.session = session
        self.base = base_url
        self._user, self._password = user, password
        self._logged_in = False

    async def page(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.base + path, allow_redirects=False) as resp:
            return resp.status, await resp.text(errors="replace")

    async def login(self) -> None:
        if self._logged_in:
            return
        status, page = await self.page("")
        form = _form_with(forms(page), "__login_name")
        if status != 200 or form is None:
            raise RuntimeError(f"the tracker's home page has no login form (HTTP {status})")
        hidden = dict(form.hidden)
        data = {
            "__login_name": self._user,
            "__login_password": self._password,
            "@action": "Login",
            "@csrf": hidden.get("@csrf", ""),
            "__came_from": hidden.get("__came_from", self.base),
        }
        async with self.session.post(
            form.action or self.base, data=data, allow_redirects=False
        ) as resp:
            page = await resp.text(errors="replace")
            location = resp.headers.get("Location", "")
        # Success is a redirect carrying the welcome banner; not following it saves a page.
        if resp.status != 302 or "ok_message=Welcome" not in location:
            _, message = banner(page)
            raise RuntimeError(f"login as {self._user} failed: {message or f'HTTP {resp.status}'}")
        self._logged_in = True


def _form_with(found: list[PageForm], name: str) -> PageForm | None:
    for form in found:
        if name in form.names:
            return form
    return None


class TrackerDriver:
    """Submits one item form (new issue or edit) the way a browser user would."""

    def __init__(self, browser: _Browser, telemetry: Telemetry) -> None:
        self._browser = browser
        self._telemetry = telemetry

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        browser = self._browser
        await browser.login()
        target = str(values.get(TARGET, "issue"))
        status, page = await browser.page(target if target != "issue" else "issue?@template=item")
        form = _form_with(forms(page), "@note")
        if status != 200 or form is None:
            raise RuntimeError(f"no item form on {target} (HTTP {status})")
        data = aiohttp.FormData(quote_fields=False)
        fields = {k: "" if v is None else str(v) for k, v in values.items() if k != TARGET}
        for name, value in form.values:
            if name not in fields:
                data.add_field(name, value)
        for name, value in fields.items():
            data.add_field(name, value)
        async with browser.session.post(
            browser.base + form.action, data=_multipart(data), allow_redirects=True
        ) as resp:
            code, shown = resp.status, await resp.text(errors="replace")
        # The screen is the banner: the tracker prints its ok message on whatever page the
        # redirect lands on, a 404 included (a faked create's issue4: "no issue with id 4"
        # under "issue 4 created"), and a screen-only reader trusts it.
        saved, message = banner(shown)
        self._telemetry.action("submit_form", target=target, status=code, screen_says_saved=saved)
        return ProductResponse(screen_says_saved=saved, status=code, message=message)


def _multipart(data: aiohttp.FormData) -> aiohttp.FormData:
    """Force multipart/form-data, the encoding Roundup's item form declares."""
    data._is_multipart = True
    return data


class IssueReadback:
    """The product's own readback: the issue list, then each issue's page, parsed."""

    def __init__(self, browser: _Browser) -> None:
        self._browser = browser

    async def read(self) -> Snapshot:
        try:
            return await self._read()
        except (aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
            return Snapshot.unreadable(f"readback failed: {type(exc).__name__}: {exc}")

    async def _read(self) -> Snapshot:
        browser = self._browser
        await browser.login()
        status, index = await browser.page(
            "issue?@columns=id,title&@pagesize=500&@sort=id&@filter="
        )
        if status != 200:
            return Snapshot.unreadable(f"the issue list answered HTTP {status}")
        ids = sorted({int(n) for n in _ISSUE_LINK.findall(index)})
        issues: list[Row] = []
        msgs: list[Row] = []
        for issue_id in ids:
            status, page = await browser.page(f"issue{issue_id}")
            if status != 200:
                return Snapshot.unreadable(f"issue{issue_id} answered HTTP {status}")
            row, notes = issue_row(issue_id, page)
            issues.append(row)
            msgs.extend(notes)
        msgs.sort(key=lambda r: int(str(r["id"])))
        return Snapshot(readable=True, tables={"issue": tuple(issues), "msg": tuple(msgs)})


def issue_row(issue_id: int, page: str) -> tuple[Row, list[Row]]:
    """One issue page as the oracle's row shape (see ``oracle.issue_rows``)."""
    chosen = selected_options(page)
    inputs = text_inputs(page)
    notes = sorted(
        ((int(m), html.unescape(text)) for m, text in _MESSAGE.findall(page)), key=lambda p: p[0]
    )

    def link(name: str) -> str | None:
        value = chosen.get(name)
        return None if value in (None, "", _NO_SELECTION) else value

    superseder = ",".join(
        sorted((s.strip() for s in inputs.get("superseder", "").split(",") if s.strip()), key=int)
    )
    row: Row = {
        "id": issue_id,
        "title": inputs.get("title", ""),
        "status": link("status"),
        "priority": link("priority"),
        "assignedto": link("assignedto"),
        "superseder": superseder,
        "messages": len(notes),
        "last_note": notes[-1][1] if notes else None,
    }
    msgs: list[Row] = [{"id": m, "issue": issue_id, "content": text} for m, text in notes]
    return row, msgs
