"""Old import paths on a schedule (docs/deprecations.md): each still gives the very object
of its new home, with a DeprecationWarning that names the new path and the release that
removes the old one; the public plugin paths and the console script's entry point stay
silent; private names are not forwarded."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
import warnings

import pytest

from effectbench.core.relocated import REMOVED_IN, deprecation_message, relocated

# Every old path with one name it must keep giving and that name's new home. The list is
# the promise (written out here, not read from the shims), so a shim that loses a name
# or points it at the wrong module fails.
OLD_PATHS = {
    "effectbench._logging": ("configure", "effectbench.cli.logsetup"),
    "effectbench.artifacts": ("build_artifacts", "effectbench.outputs.artifacts"),
    "effectbench.classify": ("classify", "effectbench.scoring.classify"),
    "effectbench.codec": ("converter", "effectbench.core.codec"),
    "effectbench.console": ("PlainProgress", "effectbench.cli.console"),
    "effectbench.events": ("TERMINAL_TYPES", "effectbench.core.events"),
    "effectbench.evidence": ("check_blob", "effectbench.core.evidence"),
    "effectbench.judge": ("judge", "effectbench.scoring.judge"),
    "effectbench.pack": ("public_pack_manifest", "effectbench.audit.pack"),
    "effectbench.parallel": ("sharded_pass", "effectbench.outputs.parallel"),
    "effectbench.pgpool": ("DatabasePool", "effectbench.postgres.pool"),
    "effectbench.pgserver": ("PgRun", "effectbench.postgres.databases"),
    "effectbench.plan": ("build_plan", "effectbench.run.plan"),
    "effectbench.records": ("EpisodeRecord", "effectbench.scoring.records"),
    "effectbench.registry": ("Registry", "effectbench.run.registry"),
    "effectbench.rundir": ("prepare_out_dir", "effectbench.run.outdir"),
    "effectbench.scheduler": ("Scheduler", "effectbench.run.scheduler"),
    "effectbench.sql_oracle": ("read_all_tables", "effectbench.oracles.sqlite"),
    "effectbench.stats": ("wilson", "effectbench.scoring.stats"),
    "effectbench.arms.llm.prices": ("load_prices", "effectbench.core.prices"),
    "effectbench.oracles.postgres": ("PostgresOracle", "effectbench.postgres.oracle"),
    "effectbench.oracles.postgres_store": ("PostgresStore", "effectbench.postgres.store"),
    "effectbench.scoring": ("fold_episode", "effectbench.projections.episodes"),
    "effectbench.audit": ("audit_provider", "effectbench.audit.runner"),
    "effectbench.log": ("read_log", "effectbench.log.reader"),
    "effectbench.cli": ("cli", "effectbench.cli.commands"),
}

# Names the old modules exported before they moved (their __all__ then), homes now.
FORMER_EXPORTS = {
    "effectbench.scoring": {
        "SCORING_VERSION": "effectbench.core.versions",
        "ProjectionError": "effectbench.projections.episodes",
        "project_episodes": "effectbench.projections.episodes",
        "row_matches": "effectbench.scoring.judge",
        "same_value": "effectbench.scoring.judge",
    },
    "effectbench.audit": {
        "AUDIT_ARMS": "effectbench.audit.roster",
        "AUDIT_FILE": "effectbench.audit.report",
        "AuditError": "effectbench.audit.checks",
        "AuditReport": "effectbench.audit.report",
        "TaskAudit": "effectbench.audit.report",
        "audit_arms": "effectbench.audit.roster",
        "audit_cli_main": "effectbench.cli.audit",
        "audit_log": "effectbench.audit.checks",
        "format_audit": "effectbench.audit.report",
        "is_refusal_control": "effectbench.audit.checks",
    },
    "effectbench.plan": {"hash_identity": "effectbench.run.plan"},
    "effectbench.pgserver": {
        "EmbeddedServer": "effectbench.postgres.server",
        "PgConfigError": "effectbench.postgres.server",
        "check_server": "effectbench.postgres.server",
        "with_database": "effectbench.postgres.server",
        "drop_orphans": "effectbench.postgres.databases",
    },
    "effectbench.artifacts": {"LogPass": "effectbench.outputs.logpass"},
    "effectbench.log": {
        "verify_log": "effectbench.log.reader",
        "LogCorrupt": "effectbench.log.lines",
    },
}

KEPT = ("effectbench.model", "effectbench.provider", "effectbench.arm")

PRIVATE = {
    "effectbench.artifacts": ("_RunFacts", "_Spill", "_ROW_OPTS"),
    "effectbench.cli": ("_report",),
    "effectbench.log": ("_SLOT_SETTERS", "_CHUNK"),
    "effectbench.pgserver": ("_lock_key", "_one_line"),
    "effectbench.oracles.postgres": ("_TABLES",),
    "effectbench.scoring": ("_HOMES",),
}


def _declared() -> list[tuple[str, str]]:
    """(old path, name) for every name every old path forwards."""
    return [
        (old, name)
        for old in sorted(OLD_PATHS)
        for name in importlib.import_module(old).__all__
        if not (old == "effectbench.cli" and name == "main")
    ]


def _lookup(old: str, name: str) -> tuple[object, list[warnings.WarningMessage]]:
    """The old path's own lookup of ``name`` (past any submodule of that name that an
    earlier import set on the package) and the warnings it gave."""
    module = importlib.import_module(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = module.__getattr__(name)
    return value, caught


@pytest.mark.parametrize(("old", "name", "home"), [(o, *v) for o, v in OLD_PATHS.items()])
def test_an_old_import_warns_with_the_new_path_and_gives_the_same_object(
    old: str, name: str, home: str
) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(home), name)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith(f"{old}.{name} is deprecated (removed in effectbench {REMOVED_IN})")
    assert f"import {name} from {home}" in message
    assert caught[0].filename == __file__


@pytest.mark.parametrize(("old", "name"), _declared())
def test_every_forwarded_name_is_its_homes_object(old: str, name: str) -> None:
    value, caught = _lookup(old, name)
    assert len(caught) == 1 and caught[0].category is DeprecationWarning
    home = str(caught[0].message).split(f"import {name} from ", 1)[1].split(";")[0]
    assert value is getattr(importlib.import_module(home), name)
    assert not isinstance(value, types.ModuleType)


@pytest.mark.parametrize(
    ("old", "name", "home"),
    [(o, n, h) for o, names in FORMER_EXPORTS.items() for n, h in names.items()],
)
def test_what_the_old_modules_exported_still_resolves(old: str, name: str, home: str) -> None:
    value, caught = _lookup(old, name)
    assert value is getattr(importlib.import_module(home), name)
    assert [str(w.message) for w in caught] == [deprecation_message(old, name, home)]


def test_from_import_of_an_old_package_name_warns_once_at_the_import() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from effectbench.audit import audit_log  # noqa: F401
    assert [(w.filename, str(w.message)) for w in caught] == [
        (
            __file__,
            deprecation_message("effectbench.audit", "audit_log", "effectbench.audit.checks"),
        )
    ]


def test_the_public_plugin_paths_and_the_entry_point_do_not_warn() -> None:
    """In a fresh interpreter with every DeprecationWarning an error: the three plugin
    modules with every name, the console script's ``effectbench.cli:main``, submodules
    of the old packages."""
    probe = "\n".join(
        [
            *(f"from {m} import *" for m in KEPT),
            "import effectbench.model, effectbench.provider, effectbench.arm",
            "for m in (effectbench.model, effectbench.provider, effectbench.arm):",
            "    [getattr(m, n) for n in dir(m)]",
            "from effectbench.cli import main, logsetup",
            "from effectbench.audit import checks, roster, attest",
            "from effectbench.scoring import labels",
            "from effectbench.log import lines, reader",
            "import effectbench, effectbench.api",
            "[getattr(effectbench, n) for n in effectbench.__all__]",
        ]
    )
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", probe],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("old", "name"), [(o, n) for o, ns in PRIVATE.items() for n in ns])
def test_private_names_are_not_forwarded(old: str, name: str) -> None:
    with pytest.raises(AttributeError):
        getattr(importlib.import_module(old), name)


def test_effectbench_rundir_points_to_both_run_directory_modules() -> None:
    import effectbench.rundir as old

    with pytest.warns(DeprecationWarning) as caught:
        old.prepare_out_dir  # noqa: B018
    message = str(caught[0].message)
    assert "effectbench.run.outdir" in message and "effectbench.core.rundir" in message
    with pytest.raises(AttributeError, match=r"RunDir.*effectbench\.core\.rundir"):
        old.RunDir  # noqa: B018


def test_a_name_that_never_moved_is_an_attribute_error() -> None:
    import effectbench.events as old

    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        old.nonesuch  # noqa: B018


def test_the_helper_refuses_private_and_twice_homed_names() -> None:
    with pytest.raises(ValueError, match="private"):
        relocated("x.old", {"x.new": ("_hidden",)})
    with pytest.raises(ValueError, match="both"):
        relocated("x.old", {"x.a": ("name",), "x.b": ("name",)})
    with pytest.raises(ValueError, match="kept and relocated"):
        relocated("x.old", {"x.a": ("name",)}, kept={"x.a": ("name",)})


def test_the_suite_turns_relocation_warnings_into_errors() -> None:
    """pyproject's filterwarnings: a test (or a first-party module) that imports an old
    path fails instead of warning."""
    import effectbench.events as old

    with pytest.raises(DeprecationWarning, match="effectbench.events.TERMINAL_TYPES"):
        old.TERMINAL_TYPES  # noqa: B018
