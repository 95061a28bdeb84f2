"""MockMedProvider: the first-party BenchmarkProvider, plugged in like any third party.

Run lifecycle: ``start`` opens a temp dir, builds a template database and serves the
product with uvicorn on 127.0.0.1; ``stop`` tears everything down. Episode lifecycle:
``provision`` copies the template into a fresh database file, seeds it, registers an
unguessable URL token for it, and hands the arm HTTP channels only; the harness gets a
read-only oracle over the file. Teardown closes everything and deletes the file.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Final, Protocol

import attrs

from effectbench.core.statedir import RunRoot
from effectbench.model import TaskSpec
from effectbench.oracles.sqlite_store import SqliteStore
from effectbench.provider import (
    ActionRecord,
    Oracle,
    ProvisionedEpisode,
)
from effectbench.providers_kit import RunGuard, ServedRun, episode_token
from effectbench_mockmed.app import Episodes, EpisodeState, build_app
from effectbench_mockmed.episode import (  # TMPDIR_ENV: moved, kept here
    TMPDIR_ENV,
    Episode,
    close_files,
    http_env,
    mode_fault,
)
from effectbench_mockmed.faults import FAULTS, Fault
from effectbench_mockmed.oracle import MockMedOracle
from effectbench_mockmed.store import (
    ANCHOR_SCHEMA,
    EncounterStore,
    StoreSchema,
    build_template,
    seed_tables,
)
from effectbench_mockmed.tasks import TASKS

if TYPE_CHECKING:
    from effectbench_mockmed.client import Connections

VERSION: Final = "1.0.0"
HTTP_TIMEOUT_S: Final = 30.0


def _no_channels(path: Path) -> Mapping[str, str]:
    return {}


def _mockmed_oracle(path: Path) -> Oracle:
    return MockMedOracle(path)


@attrs.frozen
class PackDef:
    """What makes one MockMed pack: its tasks, the product's modes, its database, and
    any extra channel the arm gets (given the episode's database path)."""

    tasks: tuple[TaskSpec, ...]
    faults: Mapping[str, Fault]
    schema: StoreSchema = ANCHOR_SCHEMA
    channels: Callable[[Path], Mapping[str, str]] = _no_channels
    oracle: Callable[[Path], Oracle] = _mockmed_oracle
    submit_timeout_s: float | None = None
    """The form driver's save timeout (None: the session's; see ``FormDriver``)."""


ANCHOR_PACK: Final = PackDef(tasks=TASKS, faults=FAULTS)
"""The nine-task anchor, exactly as the spec pins it."""


@attrs.frozen
class _Running:
    """Run-scoped resources, present between start() and stop()."""

    served: ServedRun[Episode]
    template: Path
    episodes: Episodes
    connections: Connections

    async def stop(self) -> None:
        """Every live episode, the pooled connections, the server, the run directory."""
        await self.served.stop(before_server=self.connections.close)


def _sqlite_release(
    store: EncounterStore, oracle: Oracle, front: Front | None
) -> Callable[[], Awaitable[None]]:
    """An episode's own teardown: the proxy in front, then the database file."""

    async def release() -> None:
        if front is not None:
            try:
                await front.stop()
            finally:
                await close_files(store, oracle)
        else:
            await close_files(store, oracle)

    return release


class Front(Protocol):
    """Something in front of the product for one episode (the fault proxy)."""

    @property
    def base_url(self) -> str: ...

    async def stop(self) -> None: ...

    def injections(self) -> Sequence[ActionRecord]: ...


class MockMedProvider:
    """The MockMed anchor: nine fault modes of one triage task over real HTTP and SQLite."""

    name: str = "mockmed"
    version: str = VERSION
    fixture: ClassVar[bool] = True
    """A hand-built, deterministic fixture: its figures are fixture invariants, not findings."""
    pack: ClassVar[PackDef] = ANCHOR_PACK

    def __init__(
        self, *, tmp_root: Path | None = None, http_timeout_s: float = HTTP_TIMEOUT_S
    ) -> None:
        self._root = RunRoot("mockmed", tmp_root, old_env=TMPDIR_ENV)
        self._http_timeout_s = http_timeout_s
        self._current: RunGuard[_Running] = RunGuard("MockMedProvider")

    def use_state_dir(self, path: Path) -> None:
        """The harness's per-run root for episode state (writing-a-provider.md), unless a
        ``tmp_root`` was given: the next run or resume of this run cleans it after a kill
        (the rule: ``effectbench.core.statedir``)."""
        self._root.use_state_dir(path)

    def tasks(self) -> Sequence[TaskSpec]:
        return self.pack.tasks

    @property
    def base_url(self) -> str | None:
        """The server's root URL while running (for diagnostics and tests)."""
        running = self._current.run
        return None if running is None else running.served.base_url

    async def start(self) -> None:
        await self._current.begin(self._open_run)

    async def _open_run(self) -> _Running:
        # aiohttp takes ~100 ms to import: only a run pays it, not `effectbench providers`.
        from effectbench_mockmed.client import Connections

        schema = self.pack.schema

        async def prepare(root: Path) -> None:
            build_template(root / "template.db", schema)

        episodes = Episodes()
        served: ServedRun[Episode] = await ServedRun.start(
            self._root, prepare=prepare, app=build_app(episodes), label="MockMed's HTTP server"
        )
        assert served.root is not None
        return _Running(served, served.root / "template.db", episodes, Connections())

    async def stop(self) -> None:
        await self._current.end(_Running.stop)

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        running = self._current.current()
        pack = self.pack
        fault = mode_fault(task, pack.faults, "MockMed")
        served = running.served
        token = episode_token()
        base_url = served.episode_url(token)
        front = await self._front(task, served.base_url, f"e/{token}/")
        if front is not None:
            base_url = front.base_url
        path = running.template.with_name(f"ep-{secrets.token_hex(8)}.db")  # the run dir
        store = EncounterStore(
            path, running.template, seed_tables(task.initial_state, pack.schema), pack.schema
        )
        running.episodes.add(token, EpisodeState(store, fault))
        session = running.connections.session(base_url, self._http_timeout_s)
        env = http_env(session, base_url, pack.channels(path), pack.submit_timeout_s)
        oracle = pack.oracle(path)
        release = _sqlite_release(store, oracle, front)
        teardown = served.live.add(token, Episode(token, running.episodes, session, release))
        injections = None if front is None else front.injections
        return ProvisionedEpisode(
            env=env,
            oracle=oracle,
            teardown=teardown,
            injections=injections,
            store=SqliteStore(path),
        )

    async def _front(self, task: TaskSpec, server_url: str, episode_path: str) -> Front | None:
        """What stands between the arm and the product for this episode: nothing here;
        the proxied pack puts a fault proxy there (``packs_proxy``)."""
        return None
