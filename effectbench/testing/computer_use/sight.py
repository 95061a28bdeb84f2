"""What the stand-in model sees: the page's visible layout per screenshot hash."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from effectbench.arms.computer_use.actions import Viewport
from effectbench.arms.computer_use.screen import PlaywrightScreen

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = ["Row", "Sight", "SightedScreen", "View"]

_LAYOUT_JS: Final = """() => {
  const seen = e => { const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.bottom > 0 && r.right > 0
      && r.top < innerHeight && r.left < innerWidth; };
  const at = e => { const r = e.getBoundingClientRect();
    return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]; };
  const fields = {};
  for (const e of document.querySelectorAll('form [name]')) {
    if (!seen(e)) continue;
    fields[e.name] = {tag: e.tagName.toLowerCase(), at: at(e), value: e.value,
      options: e.tagName === 'SELECT' ? Array.from(e.options, o => o.value) : null,
      labels: e.tagName === 'SELECT' ? Array.from(e.options, o => o.text.trim()) : null,
      selected: e.tagName === 'SELECT' ? e.selectedIndex : null};
  }
  const submit = document.querySelector('form button[type=submit]');
  const links = {};
  for (const a of document.querySelectorAll('a')) if (seen(a)) links[a.textContent.trim()] = at(a);
  const banner = document.querySelector('#banner');
  const table = document.querySelector('table#records');
  const rows = table && seen(table) ? Array.from(table.tBodies[0].rows, tr => Object.fromEntries(
    Array.from(tr.cells, td => [td.dataset.field,
      td.dataset.null ? null : td.dataset.num ? Number(td.textContent) : td.textContent]))) : null;
  const text = e => e.textContent.replace(/\\s+/g, ' ').trim();
  const anchors = Array.from(document.querySelectorAll('a'), a => seen(a) ? [text(a), at(a)] : null)
    .filter(Boolean);
  const buttons = {};
  for (const b of document.querySelectorAll('input[type=submit], button'))
    if (seen(b)) buttons[(b.value || text(b)).trim()] = at(b);
  const notice = document.querySelector('p.error-message')
    || document.querySelector('p.ok-message');
  const list = document.querySelector('table.list');
  const listing = list && seen(list) ? Array.from(list.querySelectorAll('tr'))
    .filter(tr => tr.querySelector('td a') && seen(tr))
    .map(tr => ({cells: Array.from(tr.cells, text), at: at(tr.querySelector('td a'))})) : null;
  const msgs = document.querySelector('table.messages');
  const h1 = document.querySelector('h1, h2');
  return {fields, links, rows,
    submit: submit && seen(submit) ? at(submit) : null,
    banner: banner && seen(banner)
      ? {saved: banner.className === 'saved', text: banner.textContent.trim()}
      : notice && seen(notice)
      ? {saved: notice.className === 'ok-message', text: text(notice)} : null,
    heading: h1 && seen(h1) ? text(h1) : null, anchors, buttons, listing,
    messages: msgs ? Array.from(msgs.querySelectorAll('pre'), text) : null};
}"""


@attrs.frozen
class Row:
    """One row of a listing table: its cells' texts and where its first link is."""

    cells: tuple[str, ...]
    at: tuple[int, int]


@attrs.frozen
class View:
    """The visible page: form fields by name (tag, centre, value, a select's option
    values and labels), links by text (centre), the submit button's centre, the banner
    (MockMed's ``#banner``, else Roundup's ok or error message) and the records table.

    For pages that are not MockMed's: the heading, every visible link in page order
    (text, centre: two links may share a text), submit buttons by label, a listing
    table's rows (cell texts, the centre of the row's first link) and the texts of the
    messages an item page shows."""

    fields: Mapping[str, Mapping[str, Any]]
    links: Mapping[str, tuple[int, int]]
    submit: tuple[int, int] | None
    banner: Mapping[str, Any] | None
    rows: tuple[Mapping[str, Any], ...] | None
    heading: str | None = None
    anchors: tuple[tuple[str, tuple[int, int]], ...] = ()
    buttons: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)
    listing: tuple[Row, ...] | None = None
    messages: tuple[str, ...] | None = None


def _point(raw: Any) -> tuple[int, int]:
    return int(raw[0]), int(raw[1])


def _row(raw: Mapping[str, Any]) -> Row:
    return Row(tuple(map(str, raw["cells"])), _point(raw["at"]))


class Sight:
    """Views by screenshot sha256; owned by one test or benchmark (any episodes at once).

    ``pixels``: what the stand-in does with an image it holds no view of. False (the
    default): it is blind to it and halts. True: it reads the image itself (a remote
    display's framebuffer, where there is no page to record: ``remote.py``), so one
    model works the web and a remote display in one run; opt-in because reading a page
    the sight missed by OCR would cost seconds and mean nothing."""

    def __init__(self, *, pixels: bool = False) -> None:
        self._views: dict[str, View] = {}
        self.pixels = pixels

    def see(self, png: bytes) -> View | None:
        return self._views.get(hashlib.sha256(png).hexdigest())

    def record(self, png: bytes, layout: Mapping[str, Any]) -> None:
        rows, listing = layout.get("rows"), layout.get("listing")
        messages = layout.get("messages")
        self._views[hashlib.sha256(png).hexdigest()] = View(
            fields=dict(layout.get("fields") or {}),
            links={k: (int(v[0]), int(v[1])) for k, v in (layout.get("links") or {}).items()},
            submit=None if layout.get("submit") is None else tuple(layout["submit"]),
            banner=layout.get("banner"),
            rows=None if rows is None else tuple(rows),
            heading=layout.get("heading"),
            anchors=tuple((str(t), _point(at)) for t, at in layout.get("anchors") or ()),
            buttons={str(k): _point(v) for k, v in (layout.get("buttons") or {}).items()},
            listing=None if listing is None else tuple(map(_row, listing)),
            messages=None if messages is None else tuple(map(str, messages)),
        )

    def screen(self, page: Page, viewport: Viewport) -> SightedScreen:
        """A ``ComputerUseArm(screen=...)`` factory."""
        return SightedScreen(page, viewport, self)

    def __len__(self) -> int:
        return len(self._views)


class SightedScreen(PlaywrightScreen):
    """The harness's screen, recording the page's layout with each capture."""

    def __init__(self, page: Page, viewport: Viewport, sight: Sight) -> None:
        super().__init__(page, viewport)
        self._sight = sight

    async def capture(self) -> bytes:
        png = await super().capture()
        self._sight.record(png, await self.page.evaluate(_LAYOUT_JS))
        return png
