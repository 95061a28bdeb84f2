"""What a run checks of its plugins before anything is written, each a one-line RunError:
an arm's own preflight, the browser a browser arm needs, whether the executor can host
each arm, the isolation asked for, and the provider's preflight of its options.

Every plugin member is read through ``effectbench.core.capabilities``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from effectbench.core.arm import Arm
from effectbench.core.capabilities import ArmCapabilities, ProviderCapabilities
from effectbench.core.provider import BenchmarkProvider
from effectbench.run.request import RunError

__all__ = [
    "apply_isolation",
    "check_browser",
    "check_executor_fits",
    "check_plugin_object",
    "checked_arms",
    "executor_of",
    "preflight_arms",
    "preflight_provider",
]


def check_plugin_object(obj: object, kind: str, label: str) -> None:
    """A plugin handed over as an object gets the registry's capability check."""
    from effectbench.run.registry import PluginError, check_capabilities

    try:
        check_capabilities(obj, kind, label)
    except PluginError as exc:
        raise RunError(str(exc)) from None


def executor_of(text: str) -> Any:
    """The ``--executor`` value as an executor (``local``, the default, runs episodes here)."""
    from effectbench.executors import ExecutorError, parse

    try:
        return parse(text)
    except ExecutorError as exc:
        raise RunError(str(exc)) from None


def check_executor_fits(arms: Mapping[str, Arm], runner: Any) -> None:
    """Browser arms and protocol agents hold a resource the harness process owns (the
    browser pool, the agent process): they run with the local executor only."""
    from effectbench.executors.local import LocalExecutor

    if runner is None or isinstance(runner, LocalExecutor):
        return
    held = sorted(
        name for name, arm in arms.items() if ArmCapabilities.of(arm).holds_harness_resource
    )
    if held:
        raise RunError(
            f"arm {', '.join(held)} needs the harness's own browser or agent process and runs "
            "with --executor local only; drop --executor or run that arm separately"
        )


def preflight_arms(arms: Mapping[str, Arm]) -> None:
    """An arm with a ``preflight()`` (e.g. ``llm`` with no endpoint configured) may
    refuse the run in one line."""
    for name, arm in arms.items():
        check = ArmCapabilities.of(arm).preflight
        if check is None:
            continue
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - plugin code: one line for the user
            raise RunError(f"arm {name!r} cannot run: {exc}") from None


def check_browser(arms: Mapping[str, Arm]) -> None:
    """A browser arm needs Playwright and a Chromium; a CDP agent needs a Chromium."""
    from effectbench.browser import (
        BrowserUnavailable,
        check_browser,
        find_chromium,
        uses_browser,
        uses_browser_cdp,
    )

    needing = sorted(name for name, arm in arms.items() if uses_browser(arm))
    cdp = sorted(name for name, arm in arms.items() if uses_browser_cdp(arm))
    if not needing and not cdp:
        return
    try:
        check_browser() if needing else find_chromium()
    except BrowserUnavailable as exc:
        raise RunError(f"arm {', '.join(needing or cdp)} drives a browser: {exc}") from None


def apply_isolation(arms: Mapping[str, Arm], isolate: bool | None) -> dict[str, Arm]:
    """Give protocol agents the run's ``--isolate`` choice. An in-process arm cannot be
    contained, so requiring isolation for one is refused; a protocol agent that would be
    isolated on a host without containment is said so in one line (and recorded)."""
    import structlog

    out: dict[str, Arm] = {}
    notes: set[str] = set()
    for name, arm in arms.items():
        configure = ArmCapabilities.of(arm).with_isolation
        if configure is None:
            if isolate:
                raise RunError(
                    f"arm {name!r} runs inside the harness process and cannot be isolated; "
                    "--isolate is for protocol agents (exec:...): drop it or run this arm "
                    "without it"
                )
            out[name] = arm
            continue
        if isolate is not None:  # else the agent keeps its own choice (by default: contain)
            arm = configure(isolate)
        out[name] = arm
        caps = ArmCapabilities.of(arm)
        if caps.execution_error is not None:  # ContainmentUnavailable: one line for the user
            raise RunError(f"{caps.execution_error}; install bubblewrap, or run without --isolate")
        if caps.execution_note:
            notes.add(caps.execution_note)
    for note in sorted(notes):
        structlog.get_logger("effectbench.agents").warning(
            "agent.not_contained", reason=note, running_as="subprocess"
        )
    return out


def checked_arms(arms: Mapping[str, Arm], runner: Any, isolate: bool | None) -> dict[str, Arm]:
    """Every arm check, in the order a user meets them; the arms as they will run."""
    check_browser(arms)
    preflight_arms(arms)
    check_executor_fits(arms, runner)
    return apply_isolation(arms, isolate)


async def preflight_provider(prov: BenchmarkProvider, options: Mapping[str, str]) -> None:
    """Let a provider check its configuration before the run directory is touched, so a
    bad one (an unreachable database, say) fails with one line and writes nothing.

    The hook is optional: ``async def preflight(self, options) -> None``, raising with a
    message for the user. A provider without it accepts no options.
    """
    check = ProviderCapabilities.of(prov).preflight
    if check is None:
        if options:
            flags = ", ".join(f"--{k}" for k in sorted(options))
            raise RunError(f"provider {prov.name!r} takes no {flags}; drop it")
        return
    try:
        await check(dict(options))
    except Exception as exc:  # noqa: BLE001 - third-party code; reported as one line
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise RunError(f"provider {prov.name!r} cannot run: {message}") from None
