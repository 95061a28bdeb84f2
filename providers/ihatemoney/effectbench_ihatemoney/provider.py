"""IHateMoneyProvider: stock I Hate Money 7.2.1 per episode, faults injected by the fault proxy.

Run lifecycle: ``start`` builds one pristine, seeded ledger in the run directory; ``stop``
tears down what is left and deletes the directory (the harness's served-provider
skeleton, ``effectbench.providers_kit.ServedRun``: no product server of its own here).
Episode lifecycle: ``provision`` starts the episode's ``FaultProxy`` (configured by the
task fixture), copies the pristine ledger, starts its Flask server behind the proxy, and
hands the arm the proxy's URL, a web driver and the product's own readback (both through
the proxy). The harness gets the generic SQLite oracle over the copy's database file,
and the mutation audit a write handle on the same file.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import anyio

from effectbench.core.statedir import RunRoot
from effectbench.faults import FaultProxy, ProxyPlan
from effectbench.model import TaskSpec
from effectbench.oracles.digest import SnapshotScope
from effectbench.oracles.sqlite import SqliteAllTablesOracle
from effectbench.oracles.sqlite_store import SqliteStore
from effectbench.provider import EnvHandle, ProvisionedEpisode, Telemetry
from effectbench.providers_kit import CurrentRun, ProxiedEpisode, episode_channels
from effectbench_ihatemoney.ledger import Ledger, build_pristine
from effectbench_ihatemoney.seed import PROJECT, PROJECT_PASSWORD
from effectbench_ihatemoney.tasks import PLANT, TASKS

if TYPE_CHECKING:
    from effectbench_ihatemoney.client import Session

__all__ = ["IHateMoneyProvider"]

VERSION: Final = "0.1.0"
HTTP_TIMEOUT_S: Final = 30.0
STARTS_AT_ONCE: Final = 4
"""Ledgers starting at the same time: a start is CPU (Python start-up, Flask's imports,
the migration check); on 2 cores more at once only makes each one slower."""


class _Episode(ProxiedEpisode[Ledger]):
    """One episode's ledger, the fault proxy in front of it and the arm's HTTP session."""

    def __init__(self, root: Path, task: TaskSpec) -> None:
        ledger = Ledger(root / "pristine", root / f"ep-{secrets.token_hex(8)}")
        proxy = FaultProxy(
            ledger.server.upstream,
            ProxyPlan.from_fixture(task.fixture),
            label="I Hate Money fault proxy",
        )
        super().__init__(proxy, ledger)

    @property
    def ledger(self) -> Ledger:
        return self.product

    async def open(self, starting: anyio.Semaphore, timeout_s: float, plant: str | None) -> Session:
        """Proxy first (its URL is the site the arm is given), then the ledger behind it."""
        import aiohttp

        from effectbench_ihatemoney.client import Session

        await self.proxy.start()
        async with starting:
            await self.ledger.start(on_port=self.proxy.retarget, plant=plant)
        self.session = aiohttp.ClientSession(
            cookie_jar=aiohttp.CookieJar(unsafe=True),  # the site is an IP address
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            trust_env=False,
        )
        return Session(self.session, self.proxy.base_url, PROJECT, PROJECT_PASSWORD)


async def _seed_pristine(root: Path) -> None:
    """The run's one pristine ledger, which every episode copies."""
    await anyio.to_thread.run_sync(build_pristine, root / "pristine")


class IHateMoneyProvider:
    """I Hate Money's household ledger, one per episode, behind a per-episode fault proxy."""

    name: str = "ihatemoney"
    version: str = VERSION
    recommended_concurrency: int = 4
    """Ledgers starting at once; ``--concurrency`` wins."""
    provisioning_timeout: float = 300.0
    """A ledger starts in ~1.5 s idle and far slower under load; ``--provider-timeout`` wins."""

    def __init__(
        self, *, tmp_root: Path | None = None, http_timeout_s: float = HTTP_TIMEOUT_S
    ) -> None:
        self._files = RunRoot("ihatemoney", tmp_root)
        self._http_timeout_s = http_timeout_s
        self._current: CurrentRun[_Episode] = CurrentRun(type(self).__name__)
        self._starting = anyio.Semaphore(STARTS_AT_ONCE)

    def use_state_dir(self, path: Path) -> None:
        """The harness's per-run root (writing-a-provider.md): the pristine ledger and every
        episode's copy go there, unless a ``tmp_root`` was given."""
        self._files.use_state_dir(path)

    def tasks(self) -> Sequence[TaskSpec]:
        return TASKS

    @property
    def root(self) -> Path | None:
        """The run directory (its ``pristine`` ledger and the episodes' copies), once started."""
        return None if self._current.run is None else self._current.run.root

    def live_pids(self) -> list[int]:
        """The live episodes' server pids (for tests)."""
        return [p for e in self._current.live() if (p := e.ledger.server.pid) is not None]

    async def start(self) -> None:
        await self._current.start(self._files, prepare=_seed_pristine)

    async def stop(self) -> None:
        await self._current.stop()

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        served, root = self._current.started()
        from effectbench_ihatemoney.browser import LedgerBrowserDriver
        from effectbench_ihatemoney.client import LedgerDriver, LedgerReadback

        episode = _Episode(root, task)
        teardown = served.live.add(episode.ledger.home.name, episode)
        try:
            plant = params.get("what") if task.fixture.get(PLANT) else None
            http = await episode.open(self._starting, self._http_timeout_s, plant)
        except BaseException:
            await teardown()
            raise
        telemetry = Telemetry()
        ledger = episode.ledger
        return ProvisionedEpisode(
            env=EnvHandle(
                channels=episode_channels(task, http.base),
                telemetry=telemetry,
                driver=LedgerDriver(http, telemetry),
                verifier=LedgerReadback(http),
                browser_driver=LedgerBrowserDriver(http.site, PROJECT, PROJECT_PASSWORD),
            ),
            oracle=SqliteAllTablesOracle(ledger.db, scope=SnapshotScope.of(task.expected_effect)),
            teardown=teardown,
            store=SqliteStore(ledger.db),  # the mutation audit's write handle
            injections=episode.proxy.injections,
            gone=ledger.server.gone,
        )
