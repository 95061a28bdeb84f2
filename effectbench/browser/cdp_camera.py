"""The harness's own screenshots of a protocol agent's episode page.

A ``CdpCamera`` captures one episode's page over the harness's DevTools pipe (its own
session on the page, attached when first needed), never through the agent's endpoint,
so an agent can neither forge the image nor point the camera elsewhere: it only ever
names a page of the episode's own browser context, as the hub recorded it. The page is
the one the harness opened for the episode; when the agent closed that one, the first
page the context still has.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Final

from effectbench.browser.cdp import CdpError
from effectbench.core.provider import PageViewport

if TYPE_CHECKING:
    from effectbench.browser.cdp_client import CdpEpisode, Hub

__all__ = ["TRIES", "TRY_TIMEOUT_S", "CdpCamera"]

TRIES: Final = 3
TRY_TIMEOUT_S: Final = 2.0
"""How long one capture may take (Chromium's own is tens of milliseconds)."""


class CdpCamera:
    """Captures one episode's page as PNG (``effectbench.core.provider.PageCamera``)."""

    def __init__(self, hub: Hub, episode: CdpEpisode, viewport: PageViewport) -> None:
        self._hub = hub
        self._episode = episode
        self.viewport = viewport
        self._sessions: dict[str, str] = {}  # target id -> the harness's session on it

    def _page(self) -> str:
        """The episode's page to capture: its first, else any the context still has."""
        pages = self._hub.targets_of(self._episode.context_id)
        if self._episode.target_id in pages:
            return self._episode.target_id
        if not pages:
            raise CdpError("the episode has no page left to capture (the agent closed it)")
        return pages[0]

    async def _session(self, target: str) -> str:
        session = self._sessions.get(target)
        if session is None:
            attached = await self._hub.pipe.call(
                "Target.attachToTarget", {"targetId": target, "flatten": True}
            )
            session = self._sessions[target] = str(attached["sessionId"])
        return session

    async def capture(self) -> bytes:
        """One PNG of the page. A capture asked for while the page navigates can go
        unanswered (the document it was meant for is gone), so each try is bounded and
        the page is asked again, up to ``TRIES`` times."""
        last: CdpError | None = None
        for _ in range(TRIES):
            if self._episode.closed:
                raise CdpError("the episode's browser context is closed")
            session = await self._session(self._page())
            try:
                shot = await self._hub.pipe.call(
                    "Page.captureScreenshot", {"format": "png"}, session=session,
                    timeout_s=TRY_TIMEOUT_S,
                )  # fmt: skip
            except CdpError as exc:
                last = exc
                continue
            return base64.b64decode(shot["data"])
        assert last is not None
        raise last
