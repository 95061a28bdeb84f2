"""The ``effectbench new`` command group (registered by effectbench.cli)."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def new() -> None:
    """Start a plugin package that works as generated."""


@new.command()
@click.argument("name")
@click.option("--http", is_flag=True, help="Serve the product over HTTP on 127.0.0.1 (starlette).")
@click.option(
    "--product",
    is_flag=True,
    help="A real product run as its own process per episode, behind the fault proxy, "
    "read by the generic SQLite oracle (edit product.py and tasks.py).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="New or empty directory to write the package to. [default: ./NAME]",
)
def provider(name: str, http: bool, product: bool, out: Path | None) -> int:
    """Write a provider package NAME: entry point, tasks, oracle, product, tests."""
    from effectbench.scaffold.generate import ScaffoldError, generate_provider, names_for

    target = out if out is not None else Path(name)
    try:
        names = names_for(name)
        generate_provider(name, target, http=http, product=product)
    except ScaffoldError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(
        f"wrote provider {name!r} ({names.dist}, package {names.pkg}) to {target.absolute()}"
    )
    click.echo(
        "next: install it beside effectbench (in a checkout: .tools/bin/uv pip install "
        f"--python .venv/bin/python {target}), then: effectbench run --provider {name}"
    )
    return 0
