"""The commands about plugins: ``providers``, ``arms`` (what is installed, what failed
to load, what one needs to run here), ``tasks`` (a provider's tasks) and ``pack`` (a
provider's public pack manifest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from effectbench.cli.common import fail, provider_option, say
from effectbench.cli.listing import emit_json, json_option
from effectbench.core.rundir import LOG_FILE, RunDir
from effectbench.run.defaults import DEFAULTS

__all__ = ["arms", "pack", "providers", "tasks"]


def _ready(group: str) -> Any:
    """The run's own pre-run checks for one plugin of ``group`` (effectbench.run.readiness)."""
    from effectbench.run.readiness import arm_needs, provider_needs

    if group == "effectbench.arms":
        return lambda info, arm: arm_needs(info.name, arm)
    return lambda info, provider: provider_needs(provider)


def _plugins(group: str, as_json: bool) -> int:
    from effectbench.run.registry import Registry, format_plugin_table

    results = Registry().load_all(group, ready=_ready(group))
    if as_json:
        emit_json([r.as_json() for r in results])
    elif not results:
        say(f"no {group} entry points installed")
        return 0
    else:
        say(format_plugin_table(results))
    failed = [r.info.name for r in results if r.status == "failed"]
    if failed:  # the listing stays whole; the exit code tells a script something is broken
        click.echo(
            f"effectbench: {len(failed)} plugin(s) failed to load: {', '.join(failed)}", err=True
        )
        return 1
    return 0


@click.command()
@json_option
def providers(as_json: bool) -> int:
    """List installed providers (distribution, version): "needs ..." names what one lacks
    to run here (a package, a setting); exit 1 when any failed to load."""
    return _plugins("effectbench.providers", as_json)


@click.command()
@json_option
def arms(as_json: bool) -> int:
    """List installed arms (distribution, version): "needs ..." names what one lacks to
    run here (Chromium, a setting); exit 1 when any failed to load."""
    return _plugins("effectbench.arms", as_json)


@click.command()
@click.argument("provider", default=DEFAULTS.provider)
@json_option
def tasks(provider: str, as_json: bool) -> int:
    """List PROVIDER's tasks in pack order (the order --limit takes them), default mockmed:
    id, title, category, substrate, split, reversible, declared."""
    from effectbench.cli.listing import task_rows, task_table
    from effectbench.run.registry import Registry

    prov = Registry().provider(provider)
    try:
        listed = list(prov.tasks())
    except Exception as exc:  # noqa: BLE001 - third-party code; reported as one line
        fail(f"provider {prov.name!r} failed to list its tasks: {type(exc).__name__}: {exc}")
    rows = task_rows(listed)
    if as_json:
        emit_json(rows)
    else:
        say(task_table(rows))
    return 0


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
