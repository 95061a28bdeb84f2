"""``effectbench new provider NAME``: write a provider package that works as generated.

The package (pyproject with the entry point, tasks, store, oracle, the arm's channels,
provider, tests) is rendered from the jinja2 templates beside this module. It installs,
passes ``effectbench run``, ``effectbench audit`` and its own tests unchanged, so an
author starts from something green and changes one piece at a time. ``--http`` serves
the product as a starlette app on 127.0.0.1 instead of calling it in process.
``--product`` (templates under ``product/``) is the kit for a real product run as a
process of its own: a fresh copy of a pristine environment per episode, the fault proxy
in front, the generic SQLite oracle, and tests that read only the tasks, so they hold
when ``product.py`` and ``tasks.py`` describe another product.
plugins_example/ stays the hand-written reference the in-process templates follow.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
from pathlib import Path
from typing import Final

import attrs

from effectbench.core.errors import EffectBenchError

__all__ = ["NAME_RULE", "Names", "ScaffoldError", "generate_provider", "names_for"]

NAME_RULE: Final = (
    "lowercase letters and digits in words joined by single hyphens, starting with a letter"
)
_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_MAX_NAME: Final = 40
_TEMPLATES: Final = Path(__file__).resolve().parent / "templates"


class ScaffoldError(EffectBenchError, ValueError):
    """The package cannot be written as asked; the message says what to change."""


@attrs.frozen
class Names:
    """Every name the package derives from NAME (the entry point, what --provider takes)."""

    name: str
    dist: str
    pkg: str
    cls: str


def names_for(name: str) -> Names:
    """The distribution, package and class names for ``name``; refuses a bad one."""
    if not _NAME.match(name) or len(name) > _MAX_NAME:
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise ScaffoldError(
            f"provider name {shown!r} is not valid: use {NAME_RULE}, at most {_MAX_NAME} "
            "characters (e.g. 'ledger' or 'ap-ledger')"
        )
    words = name.split("-")
    pkg = "effectbench_" + "_".join(words)
    if keyword.iskeyword(pkg) or importlib.util.find_spec(pkg) is not None:
        raise ScaffoldError(
            f"a module named {pkg} is already installed, so a provider named {name!r} would "
            "shadow it; choose another name"
        )
    return Names(
        name, "effectbench-" + name, pkg, "".join(w.capitalize() for w in words) + "Provider"
    )


_PRODUCT_MODULES: Final = ("__init__", "product", "product_server", "tasks", "provider", "driver",
                            "oracle", "browser")  # fmt: skip


def _files(names: Names, http: bool, product: bool = False) -> list[tuple[str, str]]:
    """(template, path in the package) for every file the package gets."""
    pkg, snake = names.pkg, names.pkg.removeprefix("effectbench_")
    if product:
        return [
            ("pyproject.toml.j2", "pyproject.toml"),
            ("product/README.md.j2", "README.md"),
            *((f"product/{m}.py.j2", f"{pkg}/{m}.py") for m in _PRODUCT_MODULES),
            *(
                (f"product/tests/test_{t}.py.j2", f"tests/test_{snake}_{t}.py")
                for t in ("provider", "cli", "contract")
            ),
        ]
    common = ["__init__", "store", "oracle", "tasks", "provider"]
    variant = ["app", "client"] if http else ["channels"]
    return [
        ("pyproject.toml.j2", "pyproject.toml"),
        ("README.md.j2", "README.md"),
        *((f"package/{m}.py.j2", f"{pkg}/{m}.py") for m in [*common, *variant]),
        ("tests/test_provider.py.j2", f"tests/test_{snake}_provider.py"),
        ("tests/test_cli.py.j2", f"tests/test_{snake}_cli.py"),
        ("tests/test_contract.py.j2", f"tests/test_{snake}_contract.py"),
    ]


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ScaffoldError(f"{out} is a file; give --out a new or empty directory")
    if out.is_dir() and any(out.iterdir()):
        raise ScaffoldError(f"{out} exists and is not empty; give --out a new or empty directory")


def generate_provider(
    name: str, out: Path, *, http: bool = False, product: bool = False
) -> list[Path]:
    """Write the package for provider ``name`` into ``out`` (new or empty); the files written.
    ``product``: the kit for a product served by a process of its own (``--product``)."""
    import jinja2

    if http and product:
        raise ScaffoldError("choose one of --http and --product (--product serves over HTTP too)")
    names = names_for(name)
    _check_out(out)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    # __all__ in the order ruff's RUF022 wants (constants, then classes), whatever the class name.
    exports = sorted(
        ["BODY_LIMIT", "TASKS", "Fault", "Store", names.cls], key=lambda n: (not n.isupper(), n)
    )
    context = {**attrs.asdict(names), "http": http, "product": product, "exports": exports}
    written: list[Path] = []
    for template, rel in _files(names, http, product):
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(env.get_template(template).render(context), encoding="utf-8")
        written.append(target)
    marker = out / names.pkg / "py.typed"
    marker.touch()
    written.append(marker)
    return written
