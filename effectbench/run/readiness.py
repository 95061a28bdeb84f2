"""Whether a loaded plugin could run here: the checks a run makes before it writes
anything (``checks.py``), asked one plugin at a time, so ``effectbench providers`` and
``effectbench arms`` can say "needs ..." (what to install or set) instead of "loaded" for
a plugin that would refuse the run. Nothing is special-cased: an arm is asked through its
declared capabilities (a browser, a CDP endpoint, its own ``preflight``), a provider
through its ``preflight`` with no options.
"""

from __future__ import annotations

from typing import Final

from effectbench.core.arm import Arm
from effectbench.core.provider import BenchmarkProvider
from effectbench.run.checks import check_browser, preflight_arms, preflight_provider
from effectbench.run.request import RunError

__all__ = ["PREFLIGHT_SECONDS", "arm_needs", "provider_needs"]

PREFLIGHT_SECONDS: Final = 10.0
"""How long a provider's preflight may take in a listing (it may reach a server named by
the environment); past it the listing says so instead of waiting."""


def _needs(message: str, *openings: str) -> str:
    """The check's line without its ``arm 'x' cannot run:`` opening, which the row says."""
    for opening in openings:
        if message.startswith(opening):
            return message[len(opening) :]
    return message


def arm_needs(name: str, arm: Arm) -> str | None:
    """What ``arm`` lacks to run here, in one line; None when nothing."""
    try:
        check_browser({name: arm})
        preflight_arms({name: arm})
    except RunError as exc:
        return _needs(str(exc), f"arm {name!r} cannot run: ", f"arm {name} drives a browser: ")
    return None


def provider_needs(provider: BenchmarkProvider) -> str | None:
    """What ``provider`` lacks to run here with no options given, in one line; None when
    nothing (or it has no preflight)."""
    import anyio

    async def check() -> None:
        with anyio.fail_after(PREFLIGHT_SECONDS):
            await preflight_provider(provider, {})

    try:
        anyio.run(check)
    except RunError as exc:
        return _needs(str(exc), f"provider {provider.name!r} cannot run: ")
    except TimeoutError:
        return f"its preflight did not finish in {PREFLIGHT_SECONDS:g} s; run it to see why"
    return None
