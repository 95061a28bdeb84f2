"""Reading I Hate Money's pages as a browser would: its forms, its flash messages, its
bill table and its participants' sidebar.

The templates are Jinja with WTForms widgets (attributes in any order, a checkbox inside
its label), so the standard library's HTML parser reads them, not regexes.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Final

import attrs

__all__ = ["BillLine", "Form", "Member", "bill_lines", "flash", "forms", "members"]

_NUMBER: Final = re.compile(r"-?[\d,]*\.?\d+")
_WEIGHT: Final = re.compile(r"\(x([\d.]+)\)")
_EDIT: Final = re.compile(r"/edit/(\d+)$")
_MEMBER: Final = re.compile(r"^bal-member-(\d+)$")


@attrs.frozen
class Form:
    """One form: where it posts, what a browser sends when the user changes nothing, and
    the labelled choices of its selects and checkbox groups (``name -> ((value, label), ...)``)."""

    action: str
    method: str
    values: tuple[tuple[str, str], ...]
    choices: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    submit: tuple[str, str] | None
    """The first submit button's name and value: what clicking it adds to the body."""
    groups: frozenset[str] = frozenset()
    """The names of its checkbox groups (a user ticks any number of their boxes)."""

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n for n, _ in self.values) | frozenset(n for n, _ in self.choices)

    def options(self, name: str) -> tuple[tuple[str, str], ...]:
        return dict(self.choices).get(name, ())


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._attrs: dict[str, str] | None = None
        self._values: list[tuple[str, str]] = []
        self._choices: dict[str, list[tuple[str, str]]] = {}
        self._submit: tuple[str, str] | None = None
        self._select: str | None = None
        self._first: str | None = None
        self._chosen: str | None = None
        self._option: str | None = None
        self._box: tuple[str, str] | None = None
        self._groups: set[str] = set()
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs_}
        if tag == "form":
            self._attrs, self._values, self._choices, self._submit = a, [], {}, None
            self._groups = set()
            return
        if self._attrs is None:
            return
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text").lower()
            value = a.get("value", "")
            if kind == "submit":
                if self._submit is None:
                    self._submit = (name, value)
            elif kind == "checkbox":
                if "checked" in a:
                    self._values.append((name, value))
                self._box, self._text = (name, value), []
                self._groups.add(name)
            elif kind not in ("button", "reset", "file", "image"):
                self._values.append((name, value))
        elif tag == "select" and name:
            self._select, self._first, self._chosen = name, None, None
            self._choices.setdefault(name, [])
        elif tag == "option" and self._select is not None:
            self._option, self._text = a.get("value", ""), []
            if self._first is None:
                self._first = self._option
            if "selected" in a:
                self._chosen = self._option

    def handle_data(self, data: str) -> None:
        if self._option is not None or self._box is not None:
            self._text.append(data)

    def _label(self) -> str:
        return " ".join("".join(self._text).split())

    def handle_endtag(self, tag: str) -> None:
        if tag == "option" and self._option is not None and self._select is not None:
            self._choices[self._select].append((self._option, self._label()))
            self._option = None
        elif tag == "select" and self._select is not None:
            value = self._chosen if self._chosen is not None else self._first
            if value is not None:
                self._values.append((self._select, value))
            self._select = None
        elif tag == "label" and self._box is not None:
            name, value = self._box
            self._choices.setdefault(name, []).append((value, self._label()))
            self._box = None
        elif tag == "form" and self._attrs is not None:
            a = self._attrs
            self.forms.append(
                Form(
                    action=a.get("action", ""),
                    method=a.get("method", "get").upper(),
                    values=tuple(self._values),
                    choices=tuple((n, tuple(c)) for n, c in self._choices.items()),
                    submit=self._submit,
                    groups=frozenset(self._groups),
                )
            )
            self._attrs = None


def forms(page: str) -> list[Form]:
    parser = _Forms()
    parser.feed(page)
    return parser.forms


class _Alerts(HTMLParser):
    """The text of every ``alert-success`` and ``alert-danger`` element, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, str]] = []
        self._kind: str | None = None
        self._depth = 0
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        if self._kind is not None:
            self._depth += tag not in ("br", "input", "img")
            return
        classes = (dict(attrs_).get("class") or "").split()
        if "alert" in classes:
            for kind in ("success", "danger"):
                if f"alert-{kind}" in classes:
                    self._kind, self._depth, self._text = kind, 1, []

    def handle_data(self, data: str) -> None:
        if self._kind is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._kind is None:
            return
        self._depth -= 1
        if self._depth == 0:
            text = " ".join("".join(self._text).replace("\u00d7", "").split())
            self.found.append((self._kind, text))
            self._kind = None


def flash(page: str) -> tuple[bool, str]:
    """(says saved, its words): saved when a success message shows and no error does."""
    parser = _Alerts()
    parser.feed(page)
    errors = [t for k, t in parser.found if k == "danger"]
    if errors:
        return False, "; ".join(errors)
    ok = [t for k, t in parser.found if k == "success"]
    return bool(ok), "; ".join(ok)


@attrs.frozen
class BillLine:
    """One row of the bill table: the bill's id, what it is for, the amount it counts
    for and where its delete button posts."""

    bill_id: int
    what: str
    shown_amount: float | None
    delete: str


@attrs.frozen
class Member:
    """One participant of the sidebar: id, name, weight and whether still active."""

    person_id: int
    name: str
    weight: float
    activated: bool


class _Tables(HTMLParser):
    """The bill table's rows (cells and edit link) and the sidebar's participants."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.bills: list[tuple[list[str], str, str]] = []
        self.members: list[tuple[str, str, str, str]] = []
        self._in_bills = False
        self._row: list[str] | None = None
        self._link = ""
        self._delete = ""
        self._cell: list[str] | None = None
        self._member: tuple[str, str] | None = None
        self._name: list[str] | None = None
        self._name_done = False

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs_}
        if tag == "table" and a.get("id") == "bill_table":
            self._in_bills = True
        elif tag == "tr" and self._in_bills:
            self._row, self._link, self._delete = [], "", ""
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "a" and self._row is not None and "edit" in a.get("class", "").split():
            self._link = a.get("href", "")
        elif tag == "form" and self._row is not None and a.get("method", "").upper() == "POST":
            self._delete = a.get("action", "")
        elif tag == "tr" and _MEMBER.match(a.get("id", "")):
            self._member = (a["id"], a.get("action", ""))
        elif tag == "td" and self._member is not None and "balance-name" in a.get("class", ""):
            self._name, self._name_done = [], False
        elif tag == "span" and self._name is not None:
            self._name_done = True

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._name is not None:
            self._name.append(("\x00" if self._name_done else "") + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.bills.append((self._row, self._link, self._delete))
            self._row = None
        elif tag == "table" and self._in_bills:
            self._in_bills = False
        elif tag == "td" and self._name is not None and self._member is not None:
            name, _, weight = "".join(self._name).partition("\x00")
            row_id, action = self._member
            self.members.append((row_id, action, " ".join(name.split()), weight))
            self._name = None
        elif tag == "tr" and self._member is not None:
            self._member = None


def _tables(page: str) -> _Tables:
    parser = _Tables()
    parser.feed(page)
    return parser


def bill_lines(page: str) -> list[BillLine]:
    """The bill table of the list page: when, who paid, what for, for whom, how much."""
    out = []
    for cells, link, delete in _tables(page).bills:
        found = _EDIT.search(link)
        if found is None or len(cells) < 5:
            continue
        number = _NUMBER.search(cells[4])
        shown = float(number.group(0).replace(",", "")) if number else None
        out.append(BillLine(int(found.group(1)), cells[2], shown, delete))
    return out


def members(page: str) -> list[Member]:
    """The sidebar's participants: ``bal-member-<id>`` rows, ``name (xWEIGHT)``; an active
    one offers to be deactivated (``action="delete"``), an inactive one to be reactivated."""
    out = []
    for row_id, action, name, weight_text in _tables(page).members:
        match = _MEMBER.match(row_id)
        weight = _WEIGHT.search(weight_text)
        if match is None:
            continue
        out.append(
            Member(
                person_id=int(match.group(1)),
                name=name,
                weight=float(weight.group(1)) if weight else 1.0,
                activated=action != "reactivate",
            )
        )
    return out
