"""What an arm's agent processes tell the run as they start and end.

A process that ends without writing a single line on stdout, and that the harness did
not kill, never started to work: a missing script, a missing module, a wrong
interpreter. When ``START_FAILURE_LIMIT`` such starts in a row fail with the same
reason, the arm stops starting processes and its remaining episodes fail at once with
that reason, instead of a dead start each. Any process that writes a line resets the
count; until one has, at most that many processes start at once. The first failure's
stderr is shown once on the console (the failure reasons carry it every time, in the
log).
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["START_FAILURE_LIMIT", "StartWatch"]

START_FAILURE_LIMIT: Final = 3


@attrs.define
class StartWatch:
    """One arm's run of failed starts (mutable, owned by one ExecArm)."""

    limit: int = START_FAILURE_LIMIT
    reason: str | None = None
    """The reason of the failed starts in a row, if any."""
    count: int = 0
    stopped: str | None = None
    """Set once ``limit`` starts in a row failed with one reason: why the arm stopped."""
    stderr_shown: bool = False
    proven: bool = False
    """Whether any process of the arm wrote a line: until then, at most ``limit`` start
    at once, so an agent that cannot start costs ``limit`` starts, not one per slot."""

    def started(self) -> None:
        """A process wrote its first line: it runs, whatever it does next."""
        self.reason, self.count, self.proven = None, 0, True

    def failed(self, reason: str) -> bool:
        """A process ended (or could not be started) before it wrote a line; True when
        this failure is the one that stops the arm."""
        if self.stopped is not None:
            return False
        if reason == self.reason:
            self.count += 1
        else:
            self.reason, self.count = reason, 1
        if self.count < self.limit:
            return False
        self.stopped = reason
        return True

    def show_stderr(self) -> bool:
        """True the first time only: whether to put a failure's stderr on the console."""
        first = not self.stderr_shown
        self.stderr_shown = True
        return first
