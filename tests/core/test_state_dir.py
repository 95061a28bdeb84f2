"""Providers keep per-episode state under the run's state root; after a SIGKILL the next
resume of that run deletes what the killed session left (MockMed's episode databases).
Every first-party provider, and the one the scaffold writes, keeps its run files by the
one rule of effectbench.core.statedir."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from effectbench.core.relocated import REMOVED_IN
from effectbench.core.statedir import STATE_DIR_ENV, RunRoot

EXE = Path(sys.executable).with_name("effectbench")


def _wait_for_provisioned(log: Path, proc: subprocess.Popen[bytes], n: int) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if log.exists() and log.read_bytes().count(b'"episode.provisioned"') >= n:
            return
        assert proc.poll() is None, "the run ended before it was killed"
        time.sleep(0.05)  # polling a file with a bounded deadline, not ordering by sleep
    raise AssertionError("no episode was provisioned in time")


def test_a_resume_after_sigkill_leaves_no_stale_episode_files(tmp_path: Path) -> None:
    env = {**os.environ, "EFFECTBENCH_STATE_DIR": str(tmp_path / "state")}
    env.pop("EFFECTBENCH_MOCKMED_TMPDIR", None)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [str(EXE), "run", "--trials", "40", "--concurrency", "4", "--out", str(out), "-q"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_provisioned(out / "events.jsonl", proc, 6)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    run_id = orjson.loads(out.joinpath("events.jsonl").read_bytes().splitlines()[0])["data"][
        "run_id"
    ]
    from effectbench.run.statedir import state_root

    os.environ["EFFECTBENCH_STATE_DIR"] = env["EFFECTBENCH_STATE_DIR"]
    try:
        root = state_root(run_id, out)
    finally:
        del os.environ["EFFECTBENCH_STATE_DIR"]
    stale = [p for p in root.rglob("*") if p.is_file()]
    assert stale, "the killed run left no episode files: the test would prove nothing"
    done = subprocess.run(
        [str(EXE), "run", "--resume", str(out), "-q"],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert not root.exists()
    assert not any((tmp_path / "state").iterdir())


def test_two_runs_of_one_plan_in_one_second_get_their_own_state_roots(tmp_path: Path) -> None:
    """The run id is the start second and the plan hash, so two identical runs started
    together share it; their state roots must still differ, or one run's start (which
    empties its root) deletes the other's databases mid-run."""
    from effectbench.run.statedir import state_root

    run_id = "20261201T121629Z-89124113"
    a, b = state_root(run_id, tmp_path / "a"), state_root(run_id, tmp_path / "b")
    assert a != b
    assert state_root(run_id, tmp_path / "a") == a  # a resume finds its own again
    assert state_root(run_id, tmp_path / "x" / ".." / "a") == a


OLD_VARIABLES = ("EFFECTBENCH_MOCKMED_TMPDIR", "EFFECTBENCH_ROUNDUP_TMPDIR")


def _clean(monkeypatch: pytest.MonkeyPatch, base: Path) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(base))
    for name in OLD_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(the state base, a root the harness hands over, a directory the provider is given)."""
    made = tuple(tmp_path / d for d in ("base", "handed", "given"))
    for d in made:
        d.mkdir()
    return made[0], made[1], made[2]


def test_the_rule_a_given_directory_then_the_handed_root_then_the_state_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, handed, given = _dirs(tmp_path)
    _clean(monkeypatch, base)
    alone = RunRoot("p")
    assert alone.make().parent == base
    alone.use_state_dir(handed)
    assert alone.make().parent == handed
    pinned = RunRoot("p", given)
    pinned.use_state_dir(handed)
    assert pinned.make().parent == given
    made = {
        d.name: [p.name[: p.name.rindex("-")] for p in d.iterdir()] for d in (base, handed, given)
    }
    assert made == {"base": ["effectbench-p"], "handed": ["p"], "given": ["effectbench-p"]}


SCAFFOLDED = "statedir-probe"
"""The provider name given to ``effectbench new provider`` here (and its run files' prefix)."""


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """The provider class ``effectbench new provider`` writes, imported from its files."""
    from effectbench.scaffold.generate import generate_provider, names_for

    names = names_for(SCAFFOLDED)
    out = tmp_path_factory.mktemp("scaffold")
    generate_provider(SCAFFOLDED, out)
    sys.path.insert(0, str(out))
    try:
        cls = getattr(importlib.import_module(f"{names.pkg}.provider"), names.cls)
        yield lambda d: cls(workdir=d)
    finally:
        sys.path.remove(str(out))
        for module in [m for m in sys.modules if m.split(".")[0] == names.pkg]:
            del sys.modules[module]


def _factory(which: str, scaffolded: Callable[..., Any]) -> Callable[..., Any]:
    if which == "mockmed":
        from effectbench_mockmed.provider import MockMedProvider

        return lambda d: MockMedProvider(tmp_root=d)
    if which == "mockmed-diff":
        from effectbench_mockmed.packs_diff import MockMedDiffProvider

        return lambda d: MockMedDiffProvider(tmp_root=d)
    if which == "roundup":
        from effectbench_roundup.provider import RoundupProvider

        return lambda d: RoundupProvider(tmp_root=d)
    if which == "ihatemoney":
        from effectbench_ihatemoney.provider import IHateMoneyProvider

        return lambda d: IHateMoneyProvider(tmp_root=d)
    if which == "notes":
        from effectbench_example_notes.provider import NotesProvider

        return lambda d: NotesProvider(workdir=d)
    return scaffolded


@pytest.mark.anyio
@pytest.mark.parametrize("given", ["nothing", "a handed root", "a directory"])
@pytest.mark.parametrize(
    "which", ["mockmed", "mockmed-diff", "roundup", "ihatemoney", "notes", SCAFFOLDED]
)
async def test_every_first_party_provider_and_the_scaffold_keep_run_files_by_the_one_rule(
    which: str,
    given: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    scaffolded: Callable[..., Any],
) -> None:
    base, handed, pinned = _dirs(tmp_path)
    _clean(monkeypatch, base)
    provider = _factory(which, scaffolded)(pinned if given == "a directory" else None)
    if given != "nothing":
        provider.use_state_dir(handed)
    await provider.start()
    try:
        found = {d.name: [p.name for p in d.iterdir()] for d in (base, handed, pinned)}
    finally:
        await provider.stop()
    where = {"nothing": base, "a handed root": handed, "a directory": pinned}[given]
    prefix = f"{which}-" if where is handed else f"effectbench-{which}-"
    assert [d for d, names in found.items() if names] == [where.name], found
    assert len(found[where.name]) == 1 and found[where.name][0].startswith(prefix), found
    assert not any(base.iterdir()) and not any(handed.iterdir()) and not any(pinned.iterdir())


@pytest.mark.anyio
@pytest.mark.parametrize("variable", OLD_VARIABLES)
async def test_a_providers_old_variable_still_pins_the_place_and_warns(
    variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scaffolded: Callable[..., Any]
) -> None:
    base, handed, pinned = _dirs(tmp_path)
    _clean(monkeypatch, base)
    monkeypatch.setenv(variable, str(pinned))
    which = "roundup" if "ROUNDUP" in variable else "mockmed"
    with pytest.warns(DeprecationWarning) as caught:
        provider = _factory(which, scaffolded)(None)
    assert [str(w.message) for w in caught] == [
        (
            f"${variable} is deprecated (removed in effectbench {REMOVED_IN}): set "
            f"${STATE_DIR_ENV} instead (docs/deprecations.md)"
        )
    ]
    provider.use_state_dir(handed)
    await provider.start()
    try:
        assert [p.name.startswith(f"effectbench-{which}-") for p in pinned.iterdir()] == [True]
        assert not any(base.iterdir()) and not any(handed.iterdir())
    finally:
        await provider.stop()
