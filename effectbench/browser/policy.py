"""Where an episode's browser may go: its product's origins and nothing else.

Pure functions over URLs; the CDP proxy (``cdp_proxy``) checks the URLs an agent names
(``Page.navigate``, ``Target.createTarget``, a request it continues), and the gate
(``gate``) checks every request the browser itself makes, navigations, redirects and
subresources alike. Neither trusts the agent: the policy comes from the episode's
channels, which the provider gave the harness.

A top-level document may be ``about:blank`` or an ``http(s)`` URL of one of the
product's origins. Every other scheme is refused (``file:``, ``chrome:``,
``devtools:``, ``view-source:``, ``data:``, ``javascript:``, ``blob:``, ...), and so is
every other host and every other port, loopback included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit

import attrs

BLANK: Final = "about:blank"
WEB_SCHEMES: Final = frozenset({"http", "https"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` of an http(s) URL (the port always spelled out, the host
    lower-cased), None for anything else or a malformed URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in WEB_SCHEMES or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port or _DEFAULT_PORTS[scheme]}"


@attrs.frozen
class OriginPolicy:
    """The origins one episode's browser may load from (``scheme://host:port``)."""

    origins: frozenset[str]

    @classmethod
    def of_channels(cls, channels: Mapping[str, str]) -> OriginPolicy:
        """Every http(s) URL among the product's channels gives its origin."""
        return cls.of_urls(channels.values())

    @classmethod
    def of_urls(cls, urls: Iterable[str]) -> OriginPolicy:
        found = (origin_of(u) for u in urls if isinstance(u, str))
        return cls(frozenset(o for o in found if o is not None))

    def refusal(self, url: object) -> str | None:
        """Why a top-level document at ``url`` is refused, or None when it may load."""
        if not isinstance(url, str):
            return "a URL must be a string"
        if url.strip() == BLANK:
            return None
        origin = origin_of(url)
        if origin is None:
            scheme = url.split(":", 1)[0].strip().lower() if ":" in url else url[:20]
            return (
                f"{scheme}: URLs are refused: an episode's browser loads only about:blank and "
                "its product's http(s) origins"
            )
        if origin not in self.origins:
            allowed = ", ".join(sorted(self.origins)) or "none"
            return f"{origin} is not one of this episode's product origins ({allowed})"
        return None


__all__ = ["BLANK", "OriginPolicy", "origin_of"]
