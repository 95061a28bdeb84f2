"""The episode shape every MockMed provider shares (SQLite in ``provider``, PostgreSQL in
``pg_provider``, the chart of ``packs_diff``): the task's mode, the arm's HTTP-only
handle, and one teardown order (the URL token, the HTTP session, then whatever the store
releases). The run around it (directory, server, live episodes, ``stop``) is the harness's
served-provider skeleton, ``effectbench.providers_kit.ServedRun``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

import anyio

from effectbench.model import TaskSpec
from effectbench.provider import EnvHandle, Oracle, Telemetry
from effectbench_mockmed.faults import Fault
from effectbench_mockmed.store import remove_database

if TYPE_CHECKING:
    import aiohttp


TMPDIR_ENV: Final = "EFFECTBENCH_MOCKMED_TMPDIR"
"""Deprecated (``effectbench.core.statedir``): it still pins where MockMed's run files go."""


def fixture_mode(task: TaskSpec, modes: Collection[str], product: str) -> str:
    """The fault mode the task's fixture names; a clear error for an unknown one."""
    mode = task.fixture.get("mode")
    if str(mode) not in modes:
        raise ValueError(
            f"task {task.task_id}: fixture mode {mode!r} is not a {product} mode; "
            f"use one of {', '.join(modes)}"
        )
    return str(mode)


def mode_fault(task: TaskSpec, faults: Mapping[str, Fault], product: str) -> Fault:
    """The fault of the mode the task's fixture names (``fixture_mode``)."""
    return faults[fixture_mode(task, faults, product)]


def http_env(
    session: aiohttp.ClientSession,
    base_url: str,
    channels: Mapping[str, str],
    submit_timeout_s: float | None,
) -> EnvHandle:
    """What the arm gets: the product's URL (plus ``channels``), the form driver and the
    REST readback over the episode's session."""
    from effectbench_mockmed.client import FormDriver, RestReadback  # loaded by start()

    telemetry = Telemetry()
    return EnvHandle(
        channels={"base_url": base_url, **channels},
        telemetry=telemetry,
        driver=FormDriver(session, telemetry, submit_timeout_s),
        verifier=RestReadback(session),
    )


class TokenTable(Protocol):
    """Where the product looks a URL token up: ``app.Episodes``, or the chart's stores."""

    def pop(self, token: str, /) -> object: ...


class SqliteFile(Protocol):
    """The product's read-write connection to an episode's own SQLite file."""

    @property
    def path(self) -> Path: ...

    def close(self) -> None: ...


async def close_files(store: SqliteFile, oracle: Oracle) -> None:
    """The release of an episode kept in a SQLite file: both connections, then the file."""
    # The product's read-write connection closes first, so the oracle's read-only one
    # is the last: SQLite then skips the checkpoint-on-close that copies the WAL into
    # a file deleted on the next line (measured ~0.15 ms per episode).
    store.close()
    close = getattr(oracle, "close", None)
    if callable(close):
        close()
    remove_database(store.path)


class Episode:
    """One provisioned episode; ``teardown`` is idempotent."""

    def __init__(
        self,
        token: str,
        episodes: TokenTable,
        session: aiohttp.ClientSession,
        release: Callable[[], Awaitable[None]],
    ) -> None:
        self._token = token
        self._episodes = episodes
        self._session = session
        self._release = release
        self._done = False

    async def teardown(self) -> None:
        if self._done:
            return
        self._done = True
        self._episodes.pop(self._token)  # no new request reaches the store
        with anyio.CancelScope(shield=True):
            await self._session.close()
            await self._release()
