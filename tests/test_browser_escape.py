"""A hostile CDP agent against the episode endpoint, written from docs/agent-protocol.md
("What a contained browser agent can reach"): every escape it tries is refused.

The hub is real (the run's contained Chromium behind the filtering proxy), the client
is the reference agent's own stdlib CDP client, the host's secrets are real files (a
file under the test's temporary directory, one in ``/dev/shm``) and the download
target is a real host directory. Each test fails on the harness before the browser was
contained (Chromium as root, outside any sandbox, downloads where the agent said)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest
from test_browser_lifecycle import _comm, _descendants

from effectbench.agents.reference.cdp_screen_only import Cdp
from effectbench.browser import BrowserPool
from effectbench.browser.cdp_proxy import CdpEpisode, CdpHub

pytestmark = pytest.mark.timeout(180)
SECRET = "effectbench-escape-" + secrets.token_hex(8)


class World:
    """The hub, run in a portal thread, and the host's secrets it must not reach."""

    def __init__(self, portal: Any, hub: CdpHub, secret_file: Path, shm_file: Path) -> None:
        self.portal = portal
        self.hub = hub
        self.secret_file = secret_file
        self.shm_file = shm_file

    def episode(self) -> CdpEpisode:
        episode: CdpEpisode = self.portal.call(self.hub.open)
        return episode

    def close(self, episode: CdpEpisode) -> None:
        self.portal.call(self.hub.close, episode)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    secret_file = tmp_path_factory.mktemp("host") / "secret.txt"
    secret_file.write_text(SECRET)
    secret_file.chmod(0o644)  # readable by anyone who can reach it: only the mounts stop it
    shm_file = Path("/dev/shm") / f"{SECRET}.sqlite"
    shm_file.write_text(SECRET)
    try:
        with anyio.from_thread.start_blocking_portal() as portal:
            hub = CdpHub()
            portal.call(hub.start)
            try:
                yield World(portal, hub, secret_file, shm_file)
            finally:
                portal.call(hub.stop)
    finally:
        shm_file.unlink()


def _page(cdp: Cdp) -> str:
    """A session on the episode's own page, with Page events on."""
    targets = cdp.call("Target.getTargets")["targetInfos"]
    page = next(t["targetId"] for t in targets if t["type"] == "page")
    attached = cdp.call("Target.attachToTarget", {"targetId": page, "flatten": True})
    session = str(attached["sessionId"])
    cdp.call("Page.enable", session=session)
    return session


def _goto(cdp: Cdp, session: str, url: str) -> str:
    """Navigate the page and return what the agent can then read of it, or why not."""
    cdp.events = [e for e in cdp.events if e.get("method") != "Page.loadEventFired"]
    try:
        nav = cdp.call("Page.navigate", {"url": url}, session)
    except RuntimeError as exc:
        return f"refused: {exc}"
    if nav.get("errorText"):
        return f"failed: {nav['errorText']}"
    cdp.wait("Page.loadEventFired", session)
    return _text(cdp, session)


def _text(cdp: Cdp, session: str) -> str:
    return str(
        cdp.call(
            "Runtime.evaluate",
            {"expression": "document.documentElement.outerHTML", "returnByValue": True},
            session,
        )["result"].get("value")
    )


def _uid(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next(x for x in status.splitlines() if x.startswith("Uid:"))
    return int(line.split()[1])


def _browser_processes(root: int) -> list[int]:
    return [pid for pid in _descendants(root) if "chrom" in _comm(pid)]


def test_the_cdp_browser_runs_as_nobody_with_no_view_of_the_host(world: World) -> None:
    assert world.hub.pipe.pid is not None
    browsers = _browser_processes(world.hub.pipe.pid)
    assert len(browsers) >= 2, browsers  # the browser and at least its zygote
    assert {_uid(pid) for pid in browsers} <= {65534, None}
    for pid in browsers:  # its mount namespace has neither secret, nor the venv
        root = Path(f"/proc/{pid}/root")
        for path in (world.secret_file, world.shm_file, Path(os.__file__)):
            assert not (root / str(path).lstrip("/")).exists(), (pid, path)


def test_the_pool_browser_runs_as_nobody_with_no_view_of_the_host(world: World) -> None:
    async def main() -> list[tuple[int | None, bool]]:
        pool = BrowserPool()
        await pool.start()
        try:
            seen = []
            for pid in _browser_processes(os.getpid()):
                if pid in _descendants(world.hub.pipe.pid or 0):
                    continue
                root = Path(f"/proc/{pid}/root")
                seen.append((_uid(pid), (root / str(world.secret_file).lstrip("/")).exists()))
            return seen
        finally:
            await pool.stop()

    seen = anyio.run(main)
    assert len(seen) >= 2, seen
    assert all(uid in (65534, None) and not visible for uid, visible in seen), seen


def test_a_file_url_reads_no_host_file_and_lists_no_host_directory(world: World) -> None:
    episode = world.episode()
    try:
        cdp = Cdp(episode.url)
        session = _page(cdp)
        for url in (
            world.secret_file.as_uri(),
            "file:///dev/shm/",
            world.secret_file.parent.as_uri() + "/",
            "view-source:" + world.secret_file.as_uri(),
        ):
            assert SECRET not in _goto(cdp, session, url), url
        try:  # a new page opened on the file directly
            created = cdp.call("Target.createTarget", {"url": world.secret_file.as_uri()})
        except RuntimeError:
            created = None
        if created is not None:
            other = cdp.call(
                "Target.attachToTarget", {"targetId": created["targetId"], "flatten": True}
            )["sessionId"]
            assert SECRET not in _text(cdp, other)
        cdp.ws.close()
    finally:
        world.close(episode)
