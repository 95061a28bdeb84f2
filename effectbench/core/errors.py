"""The one base of every user-facing error.

A user error is something the user can fix (a wrong option, a directory that is not a
run, a broken plugin): its message says what to do, and the CLI prints it on one line
and exits 2 by catching ``EffectBenchError``. Anything else is a bug.
"""

from __future__ import annotations

__all__ = ["ArtifactError", "EffectBenchError"]


class EffectBenchError(Exception):
    """Base of every error whose message is meant for the user."""


class ArtifactError(EffectBenchError):
    """The artifacts cannot be built; the message says what is wrong and what to do."""
