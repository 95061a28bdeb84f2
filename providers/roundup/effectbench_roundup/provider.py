"""RoundupProvider: stock Roundup 2.6.0 per episode, faults injected by the fault proxy.

Run lifecycle: ``start`` builds one pristine, seeded tracker in the run directory; ``stop``
tears down what is left and deletes the directory (the harness's served-provider
skeleton, ``effectbench.providers_kit.ServedRun``: no product server of its own here).
Episode lifecycle: ``provision`` starts the episode's ``FaultProxy`` (configured by the
task fixture), copies the pristine tracker with its ``web`` URL set to the *proxy's* URL
and the fixture's CSRF variant, starts ``roundup-server`` behind it, and hands the arm
the proxy's URL, a web driver and the product's own readback (both through the proxy).
The harness gets the oracle over the copy's SQLite file and message store.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import anyio

from effectbench.core.statedir import RunRoot
from effectbench.faults import FaultProxy, ProxyPlan
from effectbench.model import TaskSpec
from effectbench.oracles.sqlite_store import SqliteStore
from effectbench.provider import (
    EnvHandle,
    ProvisionedEpisode,
    Telemetry,
)
from effectbench.providers_kit import CurrentRun, ProxiedEpisode, episode_channels
from effectbench_roundup.tasks import TASKS
from effectbench_roundup.tracker import NAME, Tracker, build_pristine

__all__ = ["TMPDIR_ENV", "RoundupProvider"]

VERSION: Final = "0.1.0"
HTTP_TIMEOUT_S: Final = 30.0
TMPDIR_ENV: Final = "EFFECTBENCH_ROUNDUP_TMPDIR"
"""Deprecated (``effectbench.core.statedir``): it still pins where the run's trackers go."""
STARTS_AT_ONCE: Final = 4
"""Trackers starting at the same time. A start is mostly CPU (Python start-up, the first
page render); on 2 cores, 32 at once made every one of them miss its deadline."""
USER: Final = "helpdesk"
PASSWORD: Final = "helpdesk-pw"


class RoundupProvider:
    """Roundup's classic tracker, one per episode, behind a per-episode fault proxy."""

    name: str = "roundup"
    version: str = VERSION
    recommended_concurrency: int = 4
    """Trackers starting at once: at the harness's 32 a loaded 2-core machine lost most
    episodes to provisioning time-outs (docs/results-roundup.md); ``--concurrency`` wins."""
    provisioning_timeout: float = 300.0
    """A tracker start takes ~0.3 s idle and up to a minute under load; ``--provider-timeout``
    wins."""

    def __init__(
        self, *, tmp_root: Path | None = None, http_timeout_s: float = HTTP_TIMEOUT_S
    ) -> None:
        self._files = RunRoot("roundup", tmp_root, old_env=TMPDIR_ENV)
        self._http_timeout_s = http_timeout_s
        self._current: CurrentRun[ProxiedEpisode[Tracker]] = CurrentRun(type(self).__name__)
        self._starting: anyio.Semaphore | None = None

    def use_state_dir(self, path: Path) -> None:
        """The harness's per-run root (writing-a-provider.md): the pristine tracker and
        every episode's copy go there, unless a ``tmp_root`` was given, so the next run or
        resume of a killed run deletes what it left (``effectbench.core.statedir``)."""
        self._files.use_state_dir(path)

    def tasks(self) -> Sequence[TaskSpec]:
        return TASKS

    @property
    def pristine(self) -> Path | None:
        served = self._current.run
        return None if served is None or served.root is None else served.root / "pristine"

    def live_pids(self) -> list[int]:
        """The live episodes' roundup-server pids (for tests and the bench)."""
        return [p for e in self._current.live() if (p := e.product.pid) is not None]

    async def start(self) -> None:
        async def prepare(root: Path) -> None:
            await anyio.to_thread.run_sync(build_pristine, root / "pristine")

        await self._current.start(self._files, prepare=prepare)
        self._starting = anyio.Semaphore(STARTS_AT_ONCE)

    async def stop(self) -> None:
        await self._current.stop()

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        served, root = self._current.started()
        import aiohttp

        from effectbench_roundup.browser import RoundupBrowserDriver
        from effectbench_roundup.client import IssueReadback, TrackerDriver, _Browser
        from effectbench_roundup.oracle import TrackerOracle

        key = secrets.token_hex(8)
        tracker = Tracker(root / "pristine", root / f"ep-{key}")
        proxy = FaultProxy(
            tracker.upstream,
            ProxyPlan.from_fixture(task.fixture),
            label="Roundup fault proxy",
            base_path=f"{NAME}/",
        )
        episode = ProxiedEpisode(proxy, tracker)
        teardown = served.live.add(key, episode)
        try:
            await proxy.start()
            web = f"{proxy.base_url}{NAME}/"
            assert self._starting is not None
            async with self._starting:
                await tracker.start(
                    web, csrf=bool(task.fixture.get("csrf", True)), on_port=proxy.retarget
                )
            session = aiohttp.ClientSession(
                cookie_jar=aiohttp.CookieJar(unsafe=True),
                timeout=aiohttp.ClientTimeout(total=self._http_timeout_s),
                trust_env=False,
            )
            episode.session = session
        except BaseException:
            await teardown()
            raise
        browser = _Browser(session, web, USER, PASSWORD)
        telemetry = Telemetry()
        env = EnvHandle(
            channels=episode_channels(task, web),
            telemetry=telemetry,
            driver=TrackerDriver(browser, telemetry),
            verifier=IssueReadback(browser),
            browser_driver=RoundupBrowserDriver(web, USER, PASSWORD),
        )
        return ProvisionedEpisode(
            env=env,
            oracle=TrackerOracle(tracker.home),
            teardown=teardown,
            # the mutation audit's write handle: the tracker's own SQLite file (message
            # texts live in files beside it, which the handle does not reach)
            store=SqliteStore(tracker.home / "db" / "db"),
            injections=proxy.injections,
            gone=tracker.gone,
        )
