"""Reading Roundup's pages the way a browser would: forms, hidden inputs, banners.

Roundup's templates put attributes in any order and across lines, so a real HTML
parser (the standard library's) reads them, not regexes.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Final

import attrs

__all__ = ["PageForm", "banner", "forms", "selected_options", "text_inputs"]

_OK: Final = re.compile(r'<p class="ok-message">(.*?)</p>', re.DOTALL)
_ERROR: Final = re.compile(r'<p class="error-message">(.*?)</p>', re.DOTALL)
_TAG: Final = re.compile(r"<[^>]+>")


@attrs.frozen
class PageForm:
    method: str
    action: str
    enctype: str
    hidden: tuple[tuple[str, str], ...]
    """Hidden inputs in document order (what a browser sends with the form)."""
    names: frozenset[str]
    """Every named control of the form."""
    values: tuple[tuple[str, str], ...] = ()
    """What a browser sends when the user changes nothing (hidden and visible controls)."""


_UNSENT: Final = frozenset({"submit", "button", "reset", "file", "image"})


class _Forms(HTMLParser):
    """Each form's controls and what a browser would send for them unchanged."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[PageForm] = []
        self._open: dict[str, str] | None = None
        self._hidden: list[tuple[str, str]] = []
        self._values: list[tuple[str, str]] = []
        self._names: set[str] = set()
        self._select: str | None = None
        self._first: str | None = None
        self._chosen: str | None = None
        self._option: dict[str, str] | None = None
        self._text: list[str] = []
        self._area: str | None = None

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs_}
        if tag == "form":
            self._open, self._hidden, self._values, self._names = a, [], [], set()
            return
        if self._open is None:
            return
        name = a.get("name", "")
        if tag in ("input", "select", "textarea") and name:
            self._names.add(name)
        if tag == "input" and name:
            kind = a.get("type", "text").lower()
            if kind == "hidden":
                self._hidden.append((name, a.get("value", "")))
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self._values.append((name, a.get("value", "on")))
            elif kind not in _UNSENT:
                self._values.append((name, a.get("value", "")))
        elif tag == "select" and name:
            self._select, self._first, self._chosen = name, None, None
        elif tag == "option" and self._select is not None:
            self._option, self._text = a, []
        elif tag == "textarea" and name:
            self._area, self._text = name, []

    def handle_data(self, data: str) -> None:
        if self._option is not None or self._area is not None:
            self._text.append(data)

    def _close_option(self) -> None:
        option = self._option
        if option is None:
            return
        value = option.get("value", " ".join("".join(self._text).split()))
        if self._first is None:
            self._first = value
        if "selected" in option:
            self._chosen = value
        self._option = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "option":
            self._close_option()
        elif tag == "select" and self._select is not None:
            self._close_option()
            value = self._chosen if self._chosen is not None else self._first
            if value is not None:
                self._values.append((self._select, value))
            self._select = None
        elif tag == "textarea" and self._area is not None:
            self._values.append((self._area, "".join(self._text)))
            self._area = None
        elif tag == "form" and self._open is not None:
            a = self._open
            self.forms.append(
                PageForm(
                    method=a.get("method", "GET").upper(),
                    action=a.get("action", ""),
                    enctype=a.get("enctype", "application/x-www-form-urlencoded"),
                    hidden=tuple(self._hidden),
                    names=frozenset(self._names),
                    values=tuple(self._values),
                )
            )
            self._open = None


def forms(page: str) -> list[PageForm]:
    parser = _Forms()
    parser.feed(page)
    return parser.forms


def _text(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).split())


def banner(page: str) -> tuple[bool, str]:
    """(says saved, the banner's text): saved when an ok-message shows and no error does."""
    error = _ERROR.search(page)
    if error is not None:
        return False, _text(error.group(1))
    ok = _OK.search(page)
    if ok is not None:
        return True, _text(ok.group(1))
    return False, ""


class _Selected(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.selected: dict[str, str] = {}
        self.inputs: dict[str, str] = {}
        self._select: str | None = None
        self._option: str | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs_}
        if tag == "select":
            self._select = a.get("name")
        elif tag == "option" and self._select is not None and "selected" in a:
            self._option, self._buf = self._select, []
        elif tag == "input" and a.get("name") and a.get("type", "text").lower() == "text":
            self.inputs[a["name"]] = a.get("value", "")

    def handle_data(self, data: str) -> None:
        if self._option is not None:
            self._buf.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "option" and self._option is not None:
            self.selected[self._option] = " ".join("".join(self._buf).split())
            self._option = None
        elif tag == "select":
            self._select = None


def selected_options(page: str) -> dict[str, str]:
    """select name -> the text of its selected option."""
    parser = _Selected()
    parser.feed(page)
    return parser.selected


def text_inputs(page: str) -> dict[str, str]:
    """text input name -> its value."""
    parser = _Selected()
    parser.feed(page)
    return parser.inputs
