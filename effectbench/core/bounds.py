"""The ranges of every number an arm reports about its own model calls, and sums that
cannot overflow.

An agent's numbers are untrusted: a valid JSON ``cost_usd`` of 1e308 is finite, but two
of them overflow any sum. So each reported number has a documented range
(docs/agent-protocol.md, "Bounds"), a number outside it makes its message malformed
(an ``agent`` failure of that episode, never of the run), and the folds read logged
totals through :func:`logged` so a log written by anything else cannot overflow them
either. With every input bounded, the plain sums below stay finite: at most
``LOGGED_MAX`` per episode, and far fewer episodes than 1e290 in any run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

__all__ = [
    "LOGGED_MAX",
    "MAX_COST_USD",
    "MAX_LATENCY_MS",
    "MAX_PRICE_PER_MTOK",
    "MAX_TOKENS",
    "call_problem",
    "logged",
    "safe_fsum",
    "usage_problem",
]

MAX_TOKENS: Final = 1_000_000_000
"""Input or output tokens of one model call: an integer in 0..10^9."""
MAX_COST_USD: Final = 1_000_000.0
"""USD of one model call, as the arm reports it: a number in 0..10^6."""
MAX_LATENCY_MS: Final = 86_400_000.0
"""Milliseconds of one model call: a number in 0..8.64e7 (one day)."""
MAX_PRICE_PER_MTOK: Final = 10_000.0
"""A price table's USD per million tokens: 0..10^4, so a priced call costs at most
2 x 10^7 (both token counts at their maximum)."""
LOGGED_MAX: Final = 1e18
"""The largest per-episode total (tokens, cost, latency, counts, milliseconds) a fold
takes from a log; anything else read there is unknown, as a missing value is."""

_LIMITS: Final = {
    "input_tokens": MAX_TOKENS,
    "output_tokens": MAX_TOKENS,
    "cost_usd": MAX_COST_USD,
    "latency_ms": MAX_LATENCY_MS,
}


def _in_range(key: str, value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if key.endswith("tokens") and not isinstance(value, int):
        return False
    return 0 <= value <= _LIMITS[key]  # NaN and the infinities fail the comparison


def usage_problem(key: str, value: object) -> str | None:
    """Why ``value`` is not a valid ``key`` (``input_tokens``, ``output_tokens``,
    ``cost_usd``, ``latency_ms``) of one model call, or None (None itself is valid:
    unknown)."""
    if value is None or _in_range(key, value):
        return None
    kind = "an integer" if key.endswith("tokens") else "a finite number"
    return f"{key} must be {kind} in 0..{_LIMITS[key]:g} or null, got {value!r}"


def call_problem(
    input_tokens: object, output_tokens: object, cost_usd: object, latency_ms: object
) -> str | None:
    """The first field of one model call outside its range, in words; None when all fit."""
    for key, value in (
        ("input_tokens", input_tokens),
        ("output_tokens", output_tokens),
        ("cost_usd", cost_usd),
        ("latency_ms", latency_ms),
    ):
        why = usage_problem(key, value)
        if why is not None:
            return why
    return None


def logged(value: object) -> float | int | None:
    """A per-episode number read from a log: itself when it is a finite number in
    0..LOGGED_MAX (booleans are not numbers), else None (unknown)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if 0 <= value <= LOGGED_MAX else None


def safe_fsum(values: Iterable[float]) -> float | None:
    """``math.fsum`` that never raises: None when the values are not all finite or their
    sum would overflow (bounded inputs never get there; a caller's bad input might)."""
    try:
        total = math.fsum(values)
    except (OverflowError, ValueError):
        return None
    return total if math.isfinite(total) else None
