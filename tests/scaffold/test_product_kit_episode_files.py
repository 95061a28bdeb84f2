"""The ``--product`` kit's provider keeps each episode's files in a folder of its own (the
product's copy and its log), which the episode's teardown deletes: a run's directory holds
no episode's log once that episode is torn down, and a product that fails to start is
still explained by its log's last line.

The package is generated as an author gets it and imported from where it was written; its
product runs as a real process on 127.0.0.1 (the stand-in notes service, or, to fail a
start, a ``product.py`` whose command line exits at once, as an author's broken product
would).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from effectbench.model import trial_params
from effectbench.scaffold.generate import generate_provider, names_for

WHY = "cannot open notes.sqlite: disk I/O error"
FAILS_TO_START = f'''

def command(home: Path, port: int) -> list[str]:
    """A product that cannot start: it says why on stderr and exits with status 1."""
    return [sys.executable, "-c", "import sys; sys.exit({WHY!r})"]
'''


@pytest.fixture
def kit(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """The generated package named by the test's parameter, importable here and by the
    product's own process (``python -m <package>.product_server``)."""
    name, broken = request.param
    out = tmp_path / name
    generate_provider(name, out, product=True)
    pkg = names_for(name).pkg
    if broken:
        product = out / pkg / "product.py"
        product.write_text(product.read_text() + FAILS_TO_START)
    monkeypatch.syspath_prepend(str(out))
    monkeypatch.setenv("PYTHONPATH", str(out))
    try:
        yield importlib.import_module(pkg)
    finally:
        for module in [m for m in sys.modules if m == pkg or m.startswith(f"{pkg}.")]:
            del sys.modules[module]


@contextlib.asynccontextmanager
async def _started(kit: ModuleType, state: Path) -> AsyncIterator[tuple[Any, Path]]:
    """The package's provider started on ``state`` (stopped after), and its run's folder."""
    state.mkdir()
    (cls,) = [v for k, v in vars(kit).items() if k.endswith("Provider") and isinstance(v, type)]
    provider = cls(workdir=state)
    await provider.start()
    try:
        (run_dir,) = state.iterdir()
        yield provider, run_dir
    finally:
        await provider.stop()


def _episode_files(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.iterdir() if p.name != "pristine")


@pytest.mark.parametrize("kit", [("kit-logs", False)], indirect=True, ids=["stand-in"])
def test_a_torn_down_episode_leaves_no_log_behind(kit: ModuleType, tmp_path: Path) -> None:
    task = kit.TASKS[0]

    async def main() -> None:
        async with _started(kit, tmp_path / "state") as (provider, run_dir):
            episode = await provider.provision(task, 0, trial_params(task, 0))
            (log,) = run_dir.rglob("*.log")
            assert "GET /health" in log.read_text()  # the readiness probe's request, logged
            await episode.teardown()
            assert _episode_files(run_dir) == []
            # it was the episode's, in its folder beside the product's copy (not in the copy)
            folder, name = log.relative_to(run_dir).parts
            assert folder.startswith("ep-") and name == "product.log"
            await episode.teardown()

    anyio.run(main)
    assert list((tmp_path / "state").iterdir()) == []


@pytest.mark.parametrize("kit", [("kit-broken", True)], indirect=True, ids=["broken"])
def test_a_product_that_fails_to_start_is_explained_by_its_logs_last_line(
    kit: ModuleType, tmp_path: Path
) -> None:
    task = kit.TASKS[0]

    async def main() -> None:
        async with _started(kit, tmp_path / "state") as (provider, run_dir):
            with pytest.raises(RuntimeError) as failed:
                await provider.provision(task, 0, trial_params(task, 0))
            assert str(failed.value) == f"the kit-broken product server exited with 1: {WHY}"
            assert _episode_files(run_dir) == [] and provider.live_pids() == []

    anyio.run(main)
