"""NotesProvider: the BenchmarkProvider the ``example-notes`` entry point names.

Run lifecycle: ``start`` makes a scratch directory, ``stop`` removes it. Episode
lifecycle: ``provision`` makes a fresh database file for (task, trial) in its own
directory, seeds it, and hands the arm the product's channels and the harness the
oracle; ``teardown`` deletes that directory.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio.to_thread

from effectbench.core.statedir import RunRoot
from effectbench.model import TaskSpec
from effectbench.oracles.sqlite_store import SqliteStore
from effectbench.provider import EnvHandle, ProvisionedEpisode
from effectbench_example_notes.app import Fault, NotesApp, NotesDriver, NotesReadback
from effectbench_example_notes.oracle import NotesOracle
from effectbench_example_notes.tasks import TASKS


class NotesProvider:
    name = "example-notes"
    version = "0.1.0"

    def __init__(self, workdir: Path | None = None) -> None:
        """``workdir`` is where run scratch directories go (default: the harness's rule,
        ``effectbench.core.statedir``)."""
        self._files = RunRoot("notes", workdir)
        self._root: Path | None = None

    def use_state_dir(self, path: Path) -> None:
        """The harness's per-run root (docs/writing-a-provider.md): the run's files go
        there unless a ``workdir`` was given, so the next run or resume of a run that was
        killed deletes what it left."""
        self._files.use_state_dir(path)

    def tasks(self) -> Sequence[TaskSpec]:
        return TASKS

    async def start(self) -> None:
        self._root = self._files.make()

    async def stop(self) -> None:
        root, self._root = self._root, None
        if root is not None:
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        if self._root is None:
            raise RuntimeError(
                "NotesProvider.provision called before start(); the harness starts providers first"
            )
        # A fresh directory per episode: two arms may run the same (task, trial) at once.
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", task.task_id)
        episode_dir = Path(tempfile.mkdtemp(prefix=f"{slug}-t{trial}-", dir=self._root))
        db = episode_dir / "notes.sqlite"
        fault = Fault(str(task.fixture.get("fault", Fault.NONE.value)))
        app = await NotesApp.create(db, fault, task.initial_state)

        async def teardown() -> None:
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(episode_dir, ignore_errors=True))

        # The arm gets the app's driver and its own readback; no path to the oracle.
        env = EnvHandle(
            channels={"app": "example-notes"}, driver=NotesDriver(app), verifier=NotesReadback(app)
        )
        # The mutation audit's write handle on the same file (docs/writing-a-provider.md):
        # only the harness holds it, on twins of its own; the arm never sees it.
        return ProvisionedEpisode(
            env=env, oracle=NotesOracle(db), teardown=teardown, store=SqliteStore(db)
        )
