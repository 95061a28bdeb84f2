"""A service the harness owns (a database server, a tracker, Chromium, the Dask workers)
that died during a run, and what the harness did about it.

A lost service is not an episode's failure: the episodes it took are left unscored and
resumable, and the run ends with ``ExitCode.SERVICE_LOST`` (docs/exit-codes.md). The
value is what the run reports in one line and what ``RunOutcome.lost`` carries.
"""

from __future__ import annotations

from typing import Protocol

import attrs

__all__ = ["Service", "ServiceLoss"]


class Service(Protocol):
    """A service a provider owns for the run and lets the harness watch: the provider's
    optional ``services()`` returns these after ``start`` (docs/writing-a-provider.md)."""

    @property
    def name(self) -> str:
        """For a user: "the PostgreSQL server"."""
        ...

    async def died(self) -> str:
        """Return once the service has died, saying how in a few words."""
        ...

    async def restart(self) -> None:
        """Bring it back (once per run); raise when it cannot be."""
        ...


@attrs.frozen
class ServiceLoss:
    """``service`` names it for a user ("the PostgreSQL server"); ``how`` says how it
    died ("killed by SIGKILL", "no live worker for 60s"); ``restarted`` whether the
    harness brought it back and the run went on; ``abandoned`` the episodes in flight
    on it, left unscored for ``--resume``."""

    service: str
    how: str
    restarted: bool = False
    abandoned: int = 0

    def line(self) -> str:
        """The one line a user reads about it."""
        then = "restarted, and the run went on" if self.restarted else "the run stopped"
        held = f"; {self.abandoned} episode(s) in flight on it were abandoned, unscored"
        return f"{self.service} died ({self.how}): {then}{held if self.abandoned else ''}"
