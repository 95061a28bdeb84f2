"""The arm-facing channels into I Hate Money: a web driver and the product's own readback.

Both speak HTTP to the ledger *through the episode's fault proxy*, as a browser user
would: sign in to the project with its login form (a CSRF token in the Flask session),
open the page with the form, post it urlencoded with the button a user clicks, follow
the redirect and read the flash message. Neither holds a path to the database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeAlias

import aiohttp

from effectbench.model import JSONScalar, Row, Snapshot
from effectbench.provider import ProductResponse, Telemetry
from effectbench_ihatemoney.pages import Form, bill_lines, flash, forms, members

__all__ = ["TARGET", "LedgerDriver", "LedgerReadback", "Session", "read_pages"]

TARGET: Final = "@target"
"""The solution key naming the form: ``add``, ``edit/<bill>`` or ``members/add``, below
the project's URL, or ``delete``: the delete button of the bill listed as ``what``."""
LIST_VALUE_SEP: Final = ","
"""A checkbox group's value in a solution: its labels, comma-separated (``alice,bob``)."""


class Session:
    """One user's cookie-holding session on the ledger's site, signed in to one project."""

    def __init__(
        self, session: aiohttp.ClientSession, site: str, project: str, password: str
    ) -> None:
        self.session = session
        self.site = site
        self.project = project
        self._password = password
        self._signed_in = False

    @property
    def base(self) -> str:
        """The project's URL (its bill list)."""
        return f"{self.site}{self.project}/"

    async def page(self, url: str) -> tuple[int, str]:
        async with self.session.get(url, allow_redirects=False) as resp:
            return resp.status, await resp.text(errors="replace")

    async def sign_in(self) -> None:
        if self._signed_in:
            return
        status, page = await self.page(self.site + "authenticate")
        form = _form_with(forms(page), "password")
        if status != 200 or form is None:
            raise RuntimeError(f"the ledger's sign-in page has no login form (HTTP {status})")
        data = [(n, v) for n, v in form.values if n not in ("id", "password")]
        data += [("id", self.project), ("password", self._password)]
        async with self.session.post(
            self.site + "authenticate", data=data, allow_redirects=False
        ) as resp:
            page = await resp.text(errors="replace")
            location = resp.headers.get("Location", "")
        if resp.status != 302 or not location.rstrip("/").endswith(self.project):
            _, message = flash(page)
            raise RuntimeError(f"sign-in to {self.project} failed: {message or resp.status}")
        self._signed_in = True


def _form_with(found: list[Form], name: str) -> Form | None:
    for form in found:
        if name in form.names:
            return form
    return None


def _choose(form: Form, name: str, value: str) -> list[str]:
    """A select's or checkbox group's option values for what the user picks by label (or
    by value); a free field's value as given."""
    options = form.options(name)
    if not options:
        return [value]
    wanted = value.split(LIST_VALUE_SEP) if name in form.groups else [value]
    out = []
    for item in (w.strip() for w in wanted):
        for option, label in options:
            if item in (label, option):
                out.append(option)
                break
        else:
            out.append(item)  # not offered: sent as typed, and the product says what it thinks
    return out


async def _the_form(
    http: Session, target: str, wanted: Mapping[str, str]
) -> tuple[str, Form] | str:
    """The page's form the user fills (the delete button in the row of the bill listed
    as ``what``, else the form on the target's own page that has the most of the fields
    given), or why there is none."""
    names = frozenset(wanted)
    if target == "delete":
        status, page = await http.page(http.base)
        found = [b for b in bill_lines(page) if b.what == wanted.get("what")]
        if status != 200 or not found:
            return f"no bill {wanted.get('what')!r} on the bill list (HTTP {status})"
        action = found[0].delete
        buttons = [f for f in forms(page) if f.action == action and action]
        if not buttons:
            return f"no delete button for {wanted.get('what')!r} on the bill list"
        return http.site + action.lstrip("/"), buttons[0]
    url = http.base + target
    status, page = await http.page(url)
    candidates = [f for f in forms(page) if f.method == "POST" and f.names & names]
    if status != 200 or not candidates:
        return f"no form for {target} (HTTP {status})"
    form = max(candidates, key=lambda f: len(f.names & names))
    action = form.action
    return (http.site + action.lstrip("/") if action.startswith("/") else url), form


class LedgerDriver:
    """Submits one form (a bill, its deletion, a participant) as a browser user would."""

    def __init__(self, http: Session, telemetry: Telemetry) -> None:
        self._http = http
        self._telemetry = telemetry

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        http = self._http
        await http.sign_in()
        target = str(values.get(TARGET, "add"))
        fields = {k: "" if v is None else str(v) for k, v in values.items() if k != TARGET}
        found = await _the_form(http, target, fields)
        if isinstance(found, str):  # a user finds no such page or button: nothing is sent
            self._telemetry.action(
                "submit_form", target=target, status=None, screen_says_saved=False
            )
            return ProductResponse(screen_says_saved=False, status=None, message=found)
        url, form = found
        if target == "delete":
            fields = {}  # the row was picked by what it is for; the button sends its token
        data = [(n, v) for n, v in form.values if n not in fields]
        for name, value in fields.items():
            data += [(name, v) for v in _choose(form, name, value)]
        if form.submit is not None:
            data.append(form.submit)
        async with http.session.post(url, data=data, allow_redirects=True) as resp:
            code, shown = resp.status, await resp.text(errors="replace")
        # The screen is the flash message on the page the redirect lands on.
        saved, message = flash(shown)
        self._telemetry.action("submit_form", target=target, status=code, screen_says_saved=saved)
        return ProductResponse(screen_says_saved=saved, status=code, message=message)


BILL_COLUMNS: Final = (
    "id", "what", "payer_id", "amount", "converted_amount", "date", "bill_type", "external_link",
)  # fmt: skip
"""What the product's pages show of a bill, named as the database's columns."""


class LedgerReadback:
    """The product's own readback: the bill list and sidebar, then each bill's edit form,
    as rows shaped like the database's (``bill``, ``billowers``, ``person``)."""

    def __init__(self, http: Session) -> None:
        self._http = http

    async def read(self) -> Snapshot:
        try:
            return await self._read()
        except (aiohttp.ClientError, TimeoutError, RuntimeError, ValueError) as exc:
            return Snapshot.unreadable(f"readback failed: {type(exc).__name__}: {exc}")

    async def _read(self) -> Snapshot:
        await self._http.sign_in()
        return await read_pages(self._http.page, self._http.base, self._http.project)


Fetch: TypeAlias = Callable[[str], Awaitable[tuple[int, str]]]
"""A page by URL: its status and HTML (over HTTP, or as a browser shows it)."""


async def read_pages(fetch: Fetch, base: str, project: str) -> Snapshot:
    """The bill list and sidebar at ``base``, then each bill's edit form, as rows shaped
    like the database's; the HTTP readback and the browser's read the same pages."""
    status, page = await fetch(base)
    if status != 200:
        return Snapshot.unreadable(f"the bill list answered HTTP {status}")
    people: list[Row] = [
        {
            "id": m.person_id,
            "project_id": project,  # the project's own page lists them
            "name": m.name,
            "weight": m.weight,
            "activated": int(m.activated),
        }
        for m in members(page)
    ]
    bills: list[Row] = []
    owers: list[Row] = []
    for line in sorted(bill_lines(page), key=lambda b: b.bill_id):
        status, edit = await fetch(f"{base}edit/{line.bill_id}")
        form = _form_with(forms(edit), "what")
        if status != 200 or form is None:
            return Snapshot.unreadable(f"bill {line.bill_id} answered HTTP {status}")
        row, paid_for = bill_row(line.bill_id, form, line.shown_amount)
        bills.append(row)
        owers += [{"bill_id": line.bill_id, "person_id": p} for p in paid_for]
    tables = {"bill": tuple(bills), "billowers": tuple(owers), "person": tuple(people)}
    return Snapshot(readable=True, tables=tables)


def bill_row(bill_id: int, form: Form, shown_amount: float | None) -> tuple[Row, list[int]]:
    """One bill's edit form as the oracle's row shape, and whom it is paid for."""
    values = dict(form.values)
    paid_for = sorted(int(v) for n, v in form.values if n == "payed_for")
    payer = values.get("payer", "")
    row: Row = {
        "id": bill_id,
        "what": values.get("what", ""),
        "payer_id": int(payer) if payer.isdigit() else None,
        "amount": float(values.get("amount", "")),  # none: ValueError, unreadable
        "converted_amount": shown_amount,
        "date": values.get("date", ""),
        "bill_type": values.get("bill_type", "").upper(),
        "external_link": values.get("external_link", ""),
    }
    return row, paid_for
