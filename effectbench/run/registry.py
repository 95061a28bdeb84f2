"""Find providers and arms through entry points, and load only the one asked for.

Two entry-point groups, ``effectbench.providers`` and ``effectbench.arms``, are read
from installed distribution metadata. Listing never imports a plugin, so one broken
plugin cannot stop ``effectbench providers`` from showing the others; loading imports
exactly the module named. A ``module:attribute`` reference works wherever a name does,
so a plugin can be tried before it is packaged.

The referenced object may be a class or zero-argument factory (called) or a ready
instance (used as is); either way the result must satisfy the protocol, and a
``PluginError`` names what is missing when it does not.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Literal, TypeAlias, TypeVar, cast

import attrs
import importlib_metadata

from effectbench.core.arm import Arm
from effectbench.core.capabilities import capability_hints, capability_problems
from effectbench.core.errors import EffectBenchError
from effectbench.core.provider import BenchmarkProvider

PROVIDERS: Final = "effectbench.providers"
ARMS: Final = "effectbench.arms"
GROUPS: Final = (PROVIDERS, ARMS)

Group: TypeAlias = Literal["effectbench.providers", "effectbench.arms"]
Status: TypeAlias = Literal["loaded", "needs", "failed", "shadowed"]
Readiness: TypeAlias = Callable[["PluginInfo", Any], "str | None"]
"""What a loaded plugin lacks to run here (one line), or None: ``load_all``'s ``ready``."""

_EXEC_PREFIXES: Final = ("exec:", "exec-each:", "exec+browser:", "exec-each+browser:")
"""``--arm`` prefixes of a protocol agent given by its command line (the same as
``effectbench.agents.exec.EXEC_PREFIXES``, spelled here so listing never imports it)."""
_REF = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_KIND = {PROVIDERS: "provider", ARMS: "arm"}
_PROTOCOL: dict[str, type] = {PROVIDERS: BenchmarkProvider, ARMS: Arm}

T = TypeVar("T")


class PluginError(EffectBenchError):
    """A plugin could not be found, imported or used. The message is one line for the CLI;
    ``reason`` is the same without the plugin's description, for a table row."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


class UnknownPlugin(PluginError):
    """No entry point has this name, and it is not a ``module:attribute`` reference."""


class PluginWarning(UserWarning):
    """Something about installed plugin metadata the user should fix; never fatal."""


class DuplicatePluginWarning(PluginWarning):
    """Two distributions register the same name in one group; the first found wins."""


@attrs.frozen
class PluginInfo:
    """One entry point as declared in metadata; building it imports nothing."""

    name: str
    group: str
    value: str
    distribution: str | None
    version: str | None


@attrs.frozen
class LoadResult:
    """What happened when one entry point was loaded, for ``effectbench providers``.

    ``shadowed`` marks an entry point hidden by an earlier one with the same name;
    ``error`` is one line (exception type and message), None when loaded. ``needs``: a
    plugin that loads but could not run here, and what it lacks (``needs`` is its status).
    """

    info: PluginInfo
    status: Status
    error: str | None = None
    shadowed_by: str | None = None
    needs: str | None = None

    def as_json(self) -> dict[str, str | None]:
        """The row as ``--json`` prints it."""
        return {
            "name": self.info.name,
            "status": self.status,
            "distribution": self.info.distribution,
            "version": self.info.version,
            "entry_point": self.info.value,
            "error": self.error,
            "needs": self.needs,
            "shadowed_by": self.shadowed_by,
        }

    @property
    def ok(self) -> bool:
        return self.status == "loaded"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def _dist_field(dist: Any, field: str) -> str | None:
    try:
        value = dist.metadata[field]
    except (KeyError, OSError, ValueError):
        return None
    return value if isinstance(value, str) and value else None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _describe(info: PluginInfo) -> str:
    kind = _KIND.get(info.group, info.group)
    if info.distribution is None:
        return f"{kind} reference {info.value!r}"
    version = info.version or "?"
    return (
        f"{kind} {info.name!r} (distribution {info.distribution} {version}, entry point "
        f"{info.value})"
    )


def _import_ref(ref: str, from_cwd: bool = False) -> object:
    """Import ``module:attr.sub`` the way an entry point would. ``from_cwd`` (a reference
    the user typed): a module found nowhere on ``sys.path`` is looked for in the current
    directory too, as ``python -m`` would; the console script's ``sys.path`` starts at its
    ``bin/``, so ``--arm myarms:MyArm`` beside the user's file needed ``PYTHONPATH=.``."""
    module_name, _, attr_path = ref.partition(":")
    try:
        obj: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.partition(".")[0]
        if not from_cwd or exc.name != top or os.getcwd() in sys.path:
            raise
        here = os.getcwd()
        sys.path.append(here)  # last, so an installed module of the same name wins
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as again:
            if again.name == top:  # not here either: leave sys.path as it was
                sys.path.remove(here)
            raise
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj


def _protocol_members(protocol: type) -> list[tuple[str, str]]:
    """(member, kind) for a protocol: kind is 'attribute', 'method' or 'async method'."""
    members: dict[str, str] = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or not getattr(klass, "_is_protocol", False):
            continue
        for name in getattr(klass, "__annotations__", {}):
            if not name.startswith("_"):
                members[name] = "attribute"
        for name, value in vars(klass).items():
            if name.startswith("_") or not callable(value):
                continue
            members[name] = "async method" if inspect.iscoroutinefunction(value) else "method"
    return sorted(members.items())


def missing_members(obj: object, protocol: type) -> list[str]:
    """What ``obj`` lacks to satisfy ``protocol``, one phrase per gap (empty when it fits)."""
    gaps: list[str] = []
    for name, kind in _protocol_members(protocol):
        try:
            value = getattr(obj, name)
        except AttributeError:
            gaps.append(f"{kind} {name!r}")
            continue
        except Exception as exc:  # noqa: BLE001 - a plugin's property must not crash the listing
            gaps.append(f"{kind} {name!r} (reading it raised {_one_line(exc)})")
            continue
        if kind == "attribute":
            if name in {"name", "version"} and not (isinstance(value, str) and value):
                gaps.append(f"attribute {name!r} as a non-empty str")
        elif not callable(value):
            gaps.append(f"{kind} {name!r} (found a non-callable)")
        elif kind == "async method" and not inspect.iscoroutinefunction(value):
            gaps.append(f"{name!r} as an async method (found a plain callable)")
    return gaps


def _conforms(obj: object, protocol: type) -> bool:
    """``isinstance`` against a runtime protocol, which reads every member and so runs a
    plugin's properties: one that raises means the object does not conform."""
    try:
        return isinstance(obj, protocol)
    except Exception:  # noqa: BLE001 - plugin code
        return False


def instantiate(obj: object, protocol: type, label: str) -> Any:
    """Turn a loaded object into a protocol instance: call classes and factories, keep instances."""
    if isinstance(obj, type) or (callable(obj) and not _conforms(obj, protocol)):
        try:
            obj = obj()
        except (Exception, SystemExit) as exc:  # a plugin must not end the process
            reason = f"calling it with no arguments failed: {_one_line(exc)}"
            raise PluginError(f"{label}: {reason}", reason) from exc
    gaps = missing_members(obj, protocol)
    if gaps or not _conforms(obj, protocol):
        what = ", ".join(gaps) or "the protocol's members"
        # Name the protocol by its public path (effectbench.provider), not its home in core.
        public = protocol.__module__.replace("effectbench.core.", "effectbench.", 1)
        reason = f"does not implement {public}.{protocol.__name__}: missing {what}"
        raise PluginError(f"{label} {reason}", reason)
    check_capabilities(obj, "arm" if protocol is Arm else "provider", label)
    return obj


def check_capabilities(obj: object, kind: str, label: str) -> None:
    """Refuse a plugin whose optional hooks the harness could not call (a PluginError),
    and warn about a member that looks like a misspelt capability (a PluginWarning)."""
    problems = capability_problems(obj, kind)
    if problems:
        reason = f"has optional members the harness cannot use: {'; '.join(problems)}"
        raise PluginError(f"{label} {reason}", reason)
    for hint in capability_hints(obj, kind):
        warnings.warn(f"{label}: {hint}", PluginWarning, stacklevel=3)


def format_plugin_table(results: Iterable[LoadResult]) -> str:
    """A plain-text table of load results, one row per entry point, for the CLI."""
    header = ("NAME", "STATUS", "DISTRIBUTION", "ENTRY POINT", "NOTE")
    rows = [header]
    for r in results:
        dist = (
            f"{r.info.distribution} {r.info.version or ''}".strip() if r.info.distribution else "-"
        )
        note = r.error or r.needs or (f"hidden by {r.shadowed_by}" if r.shadowed_by else "")
        rows.append((r.info.name, r.status, dist, r.info.value, note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


class Registry:
    """Entry-point discovery with a per-instance cache.

    ``paths`` limits discovery to those directories (tests point it at a temp dir of
    ``*.dist-info``); None means ``sys.path``. Where two distributions register one
    name in a group, the first found on the path wins and a DuplicatePluginWarning
    says which one was hidden.
    """

    def __init__(self, paths: Sequence[str] | None = None) -> None:
        self._paths = None if paths is None else list(paths)
        self._found: dict[str, tuple[list[PluginInfo], list[tuple[PluginInfo, PluginInfo]]]] = {}
        self._loaded: dict[str, object] = {}

    # discovery (metadata only, no imports)

    def _distributions(self) -> Iterable[Any]:
        if self._paths is None:
            return importlib_metadata.distributions()
        return importlib_metadata.distributions(path=self._paths)

    def _discover(self, group: str) -> tuple[list[PluginInfo], list[tuple[PluginInfo, PluginInfo]]]:
        if group in self._found:
            return self._found[group]
        seen_dists: set[str] = set()
        winners: dict[str, PluginInfo] = {}
        shadowed: list[tuple[PluginInfo, PluginInfo]] = []
        for dist in self._distributions():
            dist_name = _dist_field(dist, "Name")
            key = _normalise(dist_name) if dist_name else f"<unnamed:{id(dist)}>"
            if key in seen_dists:
                # The same distribution installed twice: the first on the path is the one
                # Python imports.
                continue
            seen_dists.add(key)
            try:
                eps = list(dist.entry_points.select(group=group))
            except (ValueError, OSError) as exc:
                warnings.warn(
                    f"skipping distribution {dist_name or '?'}: its entry_points.txt is unreadable "
                    f"({_one_line(exc)}); reinstall it",
                    PluginWarning,
                    stacklevel=3,
                )
                continue
            for ep in eps:
                info = PluginInfo(ep.name, group, ep.value, dist_name, _dist_field(dist, "Version"))
                first = winners.get(ep.name)
                if first is None:
                    winners[ep.name] = info
                elif first.distribution != info.distribution:
                    shadowed.append((info, first))
                    warnings.warn(
                        f"{_KIND.get(group, group)} {ep.name!r} is registered by both "
                        f"{first.distribution} and {info.distribution}; using "
                        f"{first.distribution} ({first.value}). Uninstall one or pass "
                        f"{info.value} to pick the other.",
                        DuplicatePluginWarning,
                        stacklevel=3,
                    )
        found = (sorted(winners.values(), key=lambda i: i.name), shadowed)
        self._found[group] = found
        return found

    def list(self, group: str) -> builtins.list[PluginInfo]:
        """Every usable name in ``group``, sorted; imports no plugin module."""
        return list(self._discover(_check_group(group))[0])

    def names(self, group: str) -> builtins.list[str]:
        return [info.name for info in self.list(group)]

    def shadowed(self, group: str) -> builtins.list[PluginInfo]:
        """Entry points hidden by an earlier distribution's entry point of the same name."""
        return [info for info, _ in self._discover(_check_group(group))[1]]

    def info(self, group: str, name: str) -> PluginInfo | None:
        return next((i for i in self.list(group) if i.name == name), None)

    # loading (imports exactly what is asked for)

    def _load_target(self, info: PluginInfo) -> object:
        if info.value in self._loaded:
            return self._loaded[info.value]
        ref = info.value.partition("[")[0].strip()  # entry points may carry "[extras]"
        if not _REF.match(ref):
            reason = "is not a 'module:attribute' reference"
            raise PluginError(f"{_describe(info)} {reason}", reason)
        typed = info.distribution is None
        try:
            obj = _import_ref(ref, from_cwd=typed)
        except (Exception, SystemExit) as exc:  # a plugin must not end the process
            reason = f"failed to load: {_one_line(exc)}"
            top = ref.partition(":")[0].partition(".")[0]
            if typed and isinstance(exc, ModuleNotFoundError) and exc.name == top:
                reason += (
                    f" (looked on sys.path and in {os.getcwd()}: run from the folder that "
                    f"holds {top}.py or {top}/, or install it)"
                )
            raise PluginError(f"{_describe(info)} {reason}", reason) from exc
        self._loaded[info.value] = obj
        return obj

    def load_all(self, group: str, ready: Readiness | None = None) -> builtins.list[LoadResult]:
        """Load and check every entry point in ``group``; a failure is a row, never a raise.
        ``ready`` (the run's own checks, ``effectbench.run.readiness``) turns a loaded
        plugin that could not run here into a ``needs`` row saying what it lacks."""
        winners, shadowed = self._discover(_check_group(group))
        protocol = _PROTOCOL[group]
        results: builtins.list[LoadResult] = []
        for info in winners:
            try:
                obj = instantiate(self._load_target(info), protocol, _describe(info))
            except PluginError as exc:
                results.append(LoadResult(info, "failed", error=exc.reason))
                continue
            needs = None if ready is None else ready(info, obj)
            results.append(LoadResult(info, "loaded" if needs is None else "needs", needs=needs))
        for info, first in shadowed:
            results.append(
                LoadResult(info, "shadowed", shadowed_by=f"{first.distribution} ({first.value})")
            )
        return results

    def resolve(self, group: str, name_or_ref: str) -> Any:
        """An entry-point name or ``module:attribute`` reference -> a checked instance."""
        group = _check_group(group)
        if group == ARMS and _is_exec(name_or_ref):
            return _exec_arm(name_or_ref)
        info = self.info(group, name_or_ref)
        if info is None:
            if ":" not in name_or_ref:
                kind = _KIND[group]
                available = ", ".join(self.names(group)) or "none installed"
                raise UnknownPlugin(
                    f"unknown {kind} {name_or_ref!r}; available: {available} (or pass a "
                    f"'module:attribute' reference to {'an' if kind[0] in 'aeiou' else 'a'} "
                    f"{kind} class, factory or instance)"
                )
            if not _REF.match(name_or_ref):
                raise PluginError(
                    f"{name_or_ref!r} is not a valid 'module:attribute' reference (e.g. "
                    "'mypkg.arms:MyArm')"
                )
            info = PluginInfo(name_or_ref, group, name_or_ref, None, None)
        return instantiate(self._load_target(info), _PROTOCOL[group], _describe(info))

    def provider(self, name_or_ref: str) -> BenchmarkProvider:
        """A fresh provider instance (classes and factories are called on each request)."""
        return cast(BenchmarkProvider, self.resolve(PROVIDERS, name_or_ref))

    def arm(self, name_or_ref: str) -> Arm:
        return cast(Arm, self.resolve(ARMS, name_or_ref))


def _is_exec(spec: str) -> bool:
    """A protocol agent's command line, named (``NAME=exec:...``) or not."""
    return spec.startswith(_EXEC_PREFIXES) or spec.partition("=")[2].startswith(_EXEC_PREFIXES)


def _exec_arm(spec: str) -> Arm:
    """``exec:<command line>`` (or ``exec-each:``, a process per episode), optionally
    named ``NAME=exec:...``: an out-of-process agent speaking the agent protocol."""
    from effectbench.agents.exec import ExecArm

    try:
        return ExecArm.from_spec(spec)
    except ValueError as exc:
        raise PluginError(f"arm {spec!r}: {exc}") from None


def _check_group(group: str) -> Group:
    if group not in GROUPS:
        raise PluginError(f"unknown plugin group {group!r}; use one of {', '.join(GROUPS)}")
    return cast(Group, group)


__all__ = [
    "ARMS",
    "PROVIDERS",
    "DuplicatePluginWarning",
    "LoadResult",
    "PluginError",
    "PluginInfo",
    "PluginWarning",
    "Readiness",
    "Registry",
    "UnknownPlugin",
    "check_capabilities",
    "format_plugin_table",
    "instantiate",
    "missing_members",
]
