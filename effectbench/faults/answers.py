"""The proxy's own answers (phantom, noop, commit_then_error), built from the real exchange.

A static answer gives itself away: a real product redirects to an absolute URL of the
episode (Roundup: ``http://127.0.0.1:<port>/tp/issue4?@ok_message=...``), while a fixture
string can only say ``issue?@ok_message=issue%2042%20created``, and an agent that parses
the redirect as the product writes it crashed on that. So ``proxy.location`` and
``proxy.body`` are templates (``string.Template``: ``$name`` / ``${name}``; a ``$`` that
names nothing is kept as it is, so an existing body without placeholders is unchanged):

``${base}``
    the episode's base URL, the one the arm was handed (the proxy's URL plus the
    provider's ``base_path``);
``${path}``
    the request's path, as received;
``${id}``
    a real-looking record id: ``proxy.id`` when the fixture gives one (e.g. the id the
    product would give the next record), else the last number in the request's path
    (``/tp/issue1`` gives ``1``), else empty;
``${location}``
    the rendered ``proxy.location`` (for a body that repeats it, as a redirect page does).
"""

from __future__ import annotations

import re
from string import Template
from typing import Final

import attrs

__all__ = ["Exchange", "render"]

_LAST_NUMBER: Final = re.compile(r"(\d+)\D*$")


@attrs.frozen
class Exchange:
    """What of the real exchange a faked answer may repeat."""

    base: str
    """The episode's base URL as the arm was given it."""
    path: str
    """The request's path."""
    id: str = ""
    """The fixture's ``proxy.id``; empty: the last number in ``path``."""

    def record_id(self) -> str:
        if self.id:
            return self.id
        found = _LAST_NUMBER.search(self.path)
        return found.group(1) if found else ""

    def values(self) -> dict[str, str]:
        return {"base": self.base, "path": self.path, "id": self.record_id()}


def render(location: str, body: str, exchange: Exchange) -> tuple[str, str]:
    """``(location, body)`` with the exchange's values substituted."""
    values = exchange.values()
    where = Template(location).safe_substitute(values)
    return where, Template(body).safe_substitute(values, location=where)
