"""The commands about plugins: ``providers``, ``arms`` (what is installed, what failed
to load) and ``pack`` (a provider's public pack manifest)."""

from __future__ import annotations

from pathlib import Path

import click

from effectbench.cli.common import fail, provider_option, say
from effectbench.core.rundir import LOG_FILE, RunDir

__all__ = ["arms", "pack", "providers"]


def _plugins(group: str) -> int:
    from effectbench.run.registry import Registry, format_plugin_table

    results = Registry().load_all(group)
    if not results:
        say(f"no {group} entry points installed")
        return 0
    say(format_plugin_table(results))
    failed = [r.info.name for r in results if r.status == "failed"]
    if failed:  # the listing stays whole; the exit code tells a script something is broken
        click.echo(
            f"effectbench: {len(failed)} plugin(s) failed to load: {', '.join(failed)}", err=True
        )
        return 1
    return 0


@click.command()
def providers() -> int:
    """List installed providers (distribution, version) and any that failed to load
    (exit 1 when any did)."""
    return _plugins("effectbench.providers")


@click.command()
def arms() -> int:
    """List installed arms (distribution, version) and any that failed to load (exit 1
    when any did)."""
    return _plugins("effectbench.arms")


@click.command()
@provider_option
@click.option(
    "--audit-evidence",
    "audit_dir",
    type=click.Path(path_type=Path),
    default=None,
    help=(
        "Run directory of an `effectbench audit` of this pack; attestations are re-derived from "
        "its log."
    ),
)
def pack(provider: str, audit_dir: Path | None) -> int:
    """Print the provider's public pack manifest (test-split tasks redacted) as JSON."""
    import orjson

    from effectbench.audit.pack import public_pack_manifest
    from effectbench.run.registry import Registry

    report = None
    if audit_dir is not None:
        from effectbench.audit.checks import audit_log

        if not RunDir(audit_dir).log.is_file():
            fail(f"{audit_dir} holds no {LOG_FILE}; give the run directory of an effectbench audit")
        report = audit_log(RunDir(audit_dir).log)
    manifest = public_pack_manifest(Registry().provider(provider), audit=report)
    say(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())
    return 0
