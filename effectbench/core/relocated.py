"""Old import paths on a schedule: a name that moved keeps working, with a warning.

An old module (or a package ``__init__``) whose names now live elsewhere declares them::

    __getattr__, __dir__ = relocated(__name__, {"effectbench.core.events": ("RunStarted",)})

``from <old> import RunStarted`` and ``<old>.RunStarted`` then give the very object of the
new home and emit a ``DeprecationWarning`` naming the new path and the release that
removes the old one (``REMOVED_IN``; the policy is in docs/deprecations.md). Nothing is
imported until a name is asked for, so an old package's ``__init__`` stays as light as
its submodules. Private names (a leading underscore) are never forwarded. ``kept`` names
are forwarded without a warning: public paths that stay for good.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

REMOVED_IN: Final = "0.3"
"""The release that removes every relocated path: two minor releases after 0.1."""

ModuleGetattr = Callable[[str], Any]
ModuleDir = Callable[[], list[str]]


def _homes(moves: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """name -> its new module, refusing a private name or a name given two homes."""
    found: dict[str, str] = {}
    for home, names in moves.items():
        for name in names:
            if name.startswith("_"):
                raise ValueError(f"{home}.{name}: private names are not relocated")
            if found.setdefault(name, home) != home:
                raise ValueError(f"{name} is relocated to both {found[name]} and {home}")
    return found


def deprecation_message(old: str, name: str, home: str, see: str = "") -> str:
    """What a use of ``old.name`` says (the tests and docs/deprecations.md quote it)."""
    note = f"; {see}" if see else ""
    return (
        f"{old}.{name} is deprecated (removed in effectbench {REMOVED_IN}): "
        f"import {name} from {home}{note}"
    )


def _probed_by_import() -> bool:
    """Whether the caller of ``__getattr__`` is the import system checking for a name
    (``from pkg import name`` asks ``hasattr`` first, then takes the name: warning on the
    probe would say it twice)."""
    caller = sys._getframe(2).f_code.co_filename
    return "importlib" in caller and "_bootstrap" in caller


def relocated(
    old: str,
    moves: Mapping[str, Iterable[str]],
    *,
    kept: Mapping[str, Iterable[str]] | None = None,
    see: str = "",
) -> tuple[ModuleGetattr, ModuleDir]:
    """The module ``__getattr__`` and ``__dir__`` of the old path ``old``.

    ``moves`` maps each new home (a module path) to the names that moved there; ``kept``
    the same for names that stay without a warning. ``see`` is added to the warning and
    to the error for a name that is not there (say where a look-alike lives).
    """
    warned = _homes(moves)
    quiet = _homes(kept or {})
    both = sorted(warned.keys() & quiet.keys())
    if both:
        raise ValueError(f"{old}: {', '.join(both)} both kept and relocated")
    names = sorted([*warned, *quiet])

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            return names
        home = quiet.get(name)
        if home is None:
            home = warned.get(name)
            if home is None:
                note = f" ({see})" if see else ""
                raise AttributeError(f"module {old!r} has no attribute {name!r}{note}")
            if not _probed_by_import():
                message = deprecation_message(old, name, home, see)
                warnings.warn(message, DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__
