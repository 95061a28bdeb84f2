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

__all__ = ["Sight", "SightedScreen", "View"]

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
  return {fields, links, rows,
    submit: submit && seen(submit) ? at(submit) : null,
    banner: banner && seen(banner)
      ? {saved: banner.className === 'saved', text: banner.textContent.trim()} : null};
}"""


@attrs.frozen
class View:
    """The visible page: form fields by name (tag, centre, value, options), links by
    text (centre), the submit button's centre, the banner and the records table."""

    fields: Mapping[str, Mapping[str, Any]]
    links: Mapping[str, tuple[int, int]]
    submit: tuple[int, int] | None
    banner: Mapping[str, Any] | None
    rows: tuple[Mapping[str, Any], ...] | None


class Sight:
    """Views by screenshot sha256; owned by one test or benchmark (any episodes at once)."""

    def __init__(self) -> None:
        self._views: dict[str, View] = {}

    def see(self, png: bytes) -> View | None:
        return self._views.get(hashlib.sha256(png).hexdigest())

    def record(self, png: bytes, layout: Mapping[str, Any]) -> None:
        rows = layout.get("rows")
        self._views[hashlib.sha256(png).hexdigest()] = View(
            fields=dict(layout.get("fields") or {}),
            links={k: (int(v[0]), int(v[1])) for k, v in (layout.get("links") or {}).items()},
            submit=None if layout.get("submit") is None else tuple(layout["submit"]),
            banner=layout.get("banner"),
            rows=None if rows is None else tuple(rows),
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
