"""What a plugin may offer beyond its protocol, declared once and read in one place.

The ``Arm`` and ``BenchmarkProvider`` protocols name what every plugin must have. The
optional members below change how the harness runs one (a browser page, a long-lived
process, a state directory, a recommended concurrency). They used to be read with
``getattr`` wherever they were needed, so a misspelt ``uses_browsr = True`` did nothing
and said nothing. Now ``ArmCapabilities.of`` / ``ProviderCapabilities.of`` are the only
readers (the architecture test refuses a ``getattr`` of one of these names anywhere
else), ``capability_problems`` refuses a hook with the wrong signature, and
``capability_hints`` names a member that looks like a capability but is none.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Final

import attrs

ARM_CAPABILITIES: Final = (
    "version",
    "lifespan",
    "preflight",
    "with_isolation",
    "execution",
    "execution_note",
    "uses_model",
    "uses_browser",
    "uses_browser_cdp",
    "records_actions",
    "mutation_audit",
)
"""Optional arm members, each documented in docs/writing-an-arm.md."""

PROVIDER_CAPABILITIES: Final = (
    "fixture",
    "preflight",
    "use_state_dir",
    "services",
    "recommended_concurrency",
    "provisioning_timeout",
)
"""Optional provider members, each documented in docs/writing-a-provider.md."""

_PROTOCOL_MEMBERS: Final = {
    "arm": frozenset({"name", "run"}),
    "provider": frozenset({"name", "version", "tasks", "start", "stop", "provision"}),
}

# Hooks the harness calls, and how many positional arguments it passes each.
_ARM_HOOK_ARGS: Final = {"lifespan": 1, "preflight": 0, "with_isolation": 1}
_PROVIDER_HOOK_ARGS: Final = {"preflight": 1, "use_state_dir": 1, "services": 0}
_ASYNC_HOOKS: Final = {("provider", "preflight")}


def _flag(obj: object, name: str) -> bool:
    """A boolean capability is on only when it is exactly ``True`` (not merely truthy)."""
    return getattr(obj, name, False) is True


def _hook(obj: object, name: str) -> Any:
    value = getattr(obj, name, None)
    return value if callable(value) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@attrs.frozen
class ArmCapabilities:
    """An arm's optional members, read once.

    ``execution`` is how the arm runs (``in_process``, ``subprocess``, ``isolated``).
    A protocol agent computes it when asked and may find its sandbox missing; then
    ``execution_error`` holds why and ``execution`` is ``unavailable``.
    """

    version: str | None = None
    lifespan: Callable[[Path | None], AbstractAsyncContextManager[Any]] | None = None
    preflight: Callable[[], object] | None = None
    with_isolation: Callable[[bool | None], Any] | None = None
    execution: str = "in_process"
    execution_error: str | None = None
    execution_note: str | None = None
    uses_model: bool = False
    uses_browser: bool = False
    uses_browser_cdp: bool = False
    records_actions: bool = False
    mutation_audit: bool = False

    @property
    def holds_harness_resource(self) -> bool:
        """A browser page or a long-lived process the harness process owns: such an arm
        runs with the local executor only."""
        return self.uses_browser or self.lifespan is not None

    @classmethod
    def of(cls, arm: object) -> ArmCapabilities:
        try:
            execution, error = str(getattr(arm, "execution", "in_process")), None
        except Exception as exc:  # noqa: BLE001 - a sandbox that is missing, said in one line
            execution, error = "unavailable", str(exc) or type(exc).__name__
        note = getattr(arm, "execution_note", None)
        return cls(
            version=_text(getattr(arm, "version", None)),
            lifespan=_hook(arm, "lifespan"),
            preflight=_hook(arm, "preflight"),
            with_isolation=_hook(arm, "with_isolation"),
            execution=execution,
            execution_error=error,
            execution_note=None if note is None else str(note) or None,
            uses_model=_flag(arm, "uses_model"),
            uses_browser=_flag(arm, "uses_browser"),
            uses_browser_cdp=_flag(arm, "uses_browser_cdp"),
            records_actions=_flag(arm, "records_actions"),
            mutation_audit=_flag(arm, "mutation_audit"),
        )


@attrs.frozen
class ProviderCapabilities:
    """A provider's optional members, read once.

    ``recommended_concurrency`` and ``provisioning_timeout`` (seconds one ``provision``
    or oracle read may take) are what a real product needs when the user says nothing:
    a run uses them in place of the harness's defaults, never over a value the user gave.
    """

    fixture: bool = False
    preflight: Callable[[Mapping[str, str]], Awaitable[None]] | None = None
    use_state_dir: Callable[[Path], None] | None = None
    services: Callable[[], Iterable[Any]] | None = None
    recommended_concurrency: int | None = None
    provisioning_timeout: float | None = None

    @classmethod
    def of(cls, provider: object) -> ProviderCapabilities:
        concurrency = getattr(provider, "recommended_concurrency", None)
        timeout = getattr(provider, "provisioning_timeout", None)
        return cls(
            fixture=_flag(provider, "fixture"),
            preflight=_hook(provider, "preflight"),
            use_state_dir=_hook(provider, "use_state_dir"),
            services=_hook(provider, "services"),
            recommended_concurrency=concurrency if _is_count(concurrency) else None,
            provisioning_timeout=float(timeout)
            if isinstance(timeout, int | float) and _is_seconds(timeout)
            else None,
        )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 < float(value) < float("inf")
    )


def _positional_capacity(func: Callable[..., Any]) -> tuple[int, int | None] | None:
    """(required, most) positional arguments ``func`` takes; None if it cannot be told."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params):
        return (len(positional), -1)  # a required keyword-only argument: never callable so
    required = sum(1 for p in positional if p.default is p.empty)
    most = None if any(p.kind is p.VAR_POSITIONAL for p in params) else len(positional)
    return (required, most)


def _bad_value(kind: str, name: str, value: object) -> str | None:
    """Why a declared non-hook capability has a value the harness cannot use, or None."""
    if name in ("recommended_concurrency",) and not _is_count(value):
        return f"{name!r} must be an int >= 1, got {value!r}"
    if name == "provisioning_timeout" and not _is_seconds(value):
        return f"{name!r} must be a positive, finite number of seconds, got {value!r}"
    flag = name.startswith("uses_") or name in ("fixture", "records_actions", "mutation_audit")
    if flag and not isinstance(value, bool):
        return f"{name!r} must be True or False, got {value!r}"
    return None


def capability_problems(obj: object, kind: str) -> list[str]:
    """What is wrong with the optional members ``obj`` declares (``kind``: ``arm`` or
    ``provider``), one phrase each: a hook the harness would call with arguments it does
    not take, a sync hook that must be async, a flag that is not a bool. Empty when fine.
    Like pluggy's hook verification, this runs when the plugin loads, not mid-run."""
    hooks = _ARM_HOOK_ARGS if kind == "arm" else _PROVIDER_HOOK_ARGS
    names = ARM_CAPABILITIES if kind == "arm" else PROVIDER_CAPABILITIES
    problems: list[str] = []
    for name in names:
        try:
            value = getattr(obj, name, None)
        except Exception:  # noqa: BLE001 - a computed member (execution) is checked at run time
            value = None
        if value is None:
            continue
        if name in hooks:
            problems += _hook_problems(kind, name, value, hooks[name])
        else:
            bad = _bad_value(kind, name, value)
            if bad is not None:
                problems.append(bad)
    return problems


def _hook_problems(kind: str, name: str, value: object, passed: int) -> list[str]:
    if not callable(value):
        return [f"{name!r} must be a method, found {type(value).__name__}"]
    if (kind, name) in _ASYNC_HOOKS and not inspect.iscoroutinefunction(value):
        return [f"{name!r} must be an async method (async def {name}(self, options))"]
    capacity = _positional_capacity(value)
    if capacity is None:
        return []
    required, most = capacity
    if most == -1 or required > passed or (most is not None and most < passed):
        plural = "argument" if passed == 1 else "arguments"
        return [f"{name!r} is called with {passed} {plural} but takes {_takes(required, most)}"]
    return []


def _takes(required: int, most: int | None) -> str:
    if most == -1:
        return "a required keyword-only argument"
    if most == required:
        return f"{required}"
    return f"{required} to {'any number' if most is None else most}"


def capability_hints(obj: object, kind: str) -> list[str]:
    """Members of ``obj`` that look like a misspelt capability (``uses_browsr``), each
    with the name it is probably meant to be. Warnings, not errors: a plugin may have
    members of its own."""
    known = ARM_CAPABILITIES if kind == "arm" else PROVIDER_CAPABILITIES
    ignore = set(known) | _PROTOCOL_MEMBERS[kind]
    hints: list[str] = []
    for name in sorted(_own_members(obj)):
        if name in ignore:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if close:
            hints.append(f"{name!r} is no {kind} capability; did you mean {close[0]!r}?")
        elif name.startswith("uses_"):
            flags = ", ".join(n for n in known if n.startswith("uses_"))
            hints.append(f"{name!r} is no {kind} capability (the harness knows {flags})")
    return hints


def _own_members(obj: object) -> set[str]:
    """Public names the plugin's own classes (and the instance) define."""
    names: set[str] = set(getattr(obj, "__dict__", {}))
    klass = obj if isinstance(obj, type) else type(obj)
    for base in klass.__mro__:
        if base.__module__ in ("builtins", "typing", "abc") or base.__module__.startswith(
            "effectbench.core"
        ):
            continue
        names |= set(vars(base))
        names |= set(getattr(base, "__annotations__", {}))
    return {n for n in names if not n.startswith("_")}


__all__ = [
    "ARM_CAPABILITIES",
    "PROVIDER_CAPABILITIES",
    "ArmCapabilities",
    "ProviderCapabilities",
    "capability_hints",
    "capability_problems",
]
