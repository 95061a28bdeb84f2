"""Every option of every ``effectbench`` command says what it does in ``--help`` (issue 30
item 4: ``--trials`` had no help text)."""

from __future__ import annotations

from collections.abc import Iterator

import click

from effectbench.cli.commands import cli


def _commands(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, f"{path} {name}")


def test_every_option_of_every_command_has_help_text() -> None:
    walked = list(_commands(cli, "effectbench"))
    paths = [path for path, _ in walked]
    assert "effectbench run" in paths and "effectbench new provider" in paths
    bare: list[str] = []
    for path, command in walked:
        ctx = click.Context(command, info_name=path)
        for param in command.get_params(ctx):
            if isinstance(param, click.Option) and not (param.help or "").strip():
                bare.append(f"{path} {'/'.join(param.opts)}")
    assert not bare, f"options without help text: {', '.join(bare)}"
