"""effectbench.testing, the kit for plugin authors: the in-memory product behaves as its
form says, and the pytest fixtures are loaded by the entry point alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from effectbench.core.model import trial_params
from effectbench.testing import MODES, InMemoryProvider, MemoryForm, ScriptedArm, every_mode


def _episode(provider: InMemoryProvider) -> Any:
    task = provider.tasks()[0]
    return anyio.run(lambda: provider.provision(task, 0, trial_params(task, 0)))


def test_the_form_refuses_a_value_it_does_not_offer_and_stores_nothing() -> None:
    ep = _episode(InMemoryProvider(form=MemoryForm(choices={"owner": ("p1", "p2")})))

    async def go() -> Any:
        refused = await ep.env.driver.submit({"owner": "p3", "note": "x"})
        saved = await ep.env.driver.submit({"owner": "p2", "note": "x"})
        return refused, saved, await ep.oracle.read()

    refused, saved, snap = anyio.run(go)
    assert (refused.status, refused.screen_says_saved, saved.screen_says_saved) == (
        422,
        False,
        True,
    )
    assert snap.tables["notes"] == ({"id": 1, "owner": "p2", "note": "x"},)


def test_upsert_fault_confusable_and_readback() -> None:
    form = MemoryForm(
        upsert_on=("owner",),
        fault=lambda v: {**v, "note": f"{v['note']}!"},
        confusable={"owner": "p2"},
        readback=True,
    )
    ep = _episode(InMemoryProvider(form=form))
    assert orjson.loads(ep.env.channels["confusable"]) == {"owner": "p2"}

    async def go() -> Any:
        await ep.env.driver.submit({"owner": "p1", "note": "a"})
        await ep.env.driver.submit({"owner": "p1", "note": "b"})
        return await ep.oracle.read(), await ep.env.verifier.read()

    snap, own = anyio.run(go)
    assert snap.tables["notes"] == ({"id": 1, "owner": "p1", "note": "b!"},) == own.tables["notes"]


def test_every_mode_is_a_task_and_a_scripted_arm_submits_times(tmp_path: Any) -> None:
    from effectbench.api import evaluate_provider

    assert [t.fixture["mode"] for t in every_mode().tasks()] == [
        m for m in MODES if "hangs" not in m
    ]
    result = evaluate_provider(
        [ScriptedArm(times=2)], InMemoryProvider(), trials=1, out=tmp_path / "run"
    )
    (row,) = [orjson.loads(x) for x in (result.run_dir / "results.jsonl").read_bytes().splitlines()]
    assert (
        row["telemetry"]["actions"] == 2 and row["true_state"] == "WRONG_PERSISTED"
    )  # a duplicate


def test_the_fixtures_come_from_the_entry_point(pytestconfig: pytest.Config) -> None:
    # Registered under the pytest11 entry point's name, not through a conftest.
    assert pytestconfig.pluginmanager.has_plugin("effectbench")


def test_effectbench_run_fixture_writes_under_tmp_path(effectbench_run: Any, tmp_path: Any) -> None:
    result = effectbench_run([ScriptedArm()], InMemoryProvider())
    assert result.run_dir.parent == tmp_path and result.metrics["arms"]["scripted"]


def test_run_cli_runs_this_environments_command_and_returns_a_refusal(tmp_path: Any) -> None:
    import effectbench
    from effectbench.testing import run_cli

    done = run_cli("--version", cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, f"effectbench {effectbench.__version__}")
    refused = run_cli("rescore", str(tmp_path / "nowhere"), env={}, timeout=60)
    assert refused.returncode == 2 and "does not exist" in refused.stderr  # returned, not raised


def test_effectbench_command_falls_back_to_python_dash_m(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from effectbench.testing import effectbench_command

    assert effectbench_command() == [str(Path(sys.executable).with_name("effectbench"))]
    python = str(tmp_path / "bin" / "python3")  # no console script beside it
    monkeypatch.setattr(sys, "executable", python)
    assert effectbench_command() == [python, "-m", "effectbench"]
