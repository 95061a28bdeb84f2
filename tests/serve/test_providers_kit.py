"""The served-provider skeleton (effectbench.providers_kit): a run directory, a product
served on loopback and the live episodes, stopped in one order; over real HTTP and files."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import attrs
import pytest
from effectbench_mockmed import TASKS

from effectbench.core.statedir import RunRoot
from effectbench.faults import FaultProxy, ProxyPlan
from effectbench.provider import Alternatives
from effectbench.providers_kit import (
    CurrentRun,
    ProductProcess,
    ProxiedEpisode,
    Released,
    RunGuard,
    ServedRun,
    episode_channels,
    episode_token,
)


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that answers every request with its own path."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


async def _get(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.text()


def test_stop_ends_each_live_episode_once_then_the_server_then_the_directory(
    tmp_path: Path,
) -> None:
    order: list[str] = []

    async def main() -> None:
        async def prepare(root: Path) -> None:
            (root / "template").write_text("built once")

        run: ServedRun[Released] = await ServedRun.start(
            RunRoot("kit", tmp_path), prepare=prepare, app=_app
        )
        root = run.root
        assert root is not None and (root / "template").read_text() == "built once"
        tokens = [episode_token(), episode_token()]
        assert tokens[0] != tokens[1]

        def episode(token: str) -> Released:
            async def release() -> None:  # the server still answers while episodes end
                order.append(await _get(run.episode_url(token)))
                order.append(f"files there: {root.exists()}")

            return Released(release)

        first = run.live.add(tokens[0], episode(tokens[0]))
        run.live.add(tokens[1], episode(tokens[1]))
        await first()
        await first()  # idempotent, and no longer live
        assert len(run.live.values()) == 1

        async def shared() -> None:
            order.append("shared connections closed")

        await run.stop(before_server=shared)
        assert not root.exists()

    anyio.run(main)
    assert order == [
        "/e/" + order[0].split("/")[2] + "/",
        "files there: True",
        "/e/" + order[2].split("/")[2] + "/",
        "files there: True",
        "shared connections closed",
    ]
    assert order[0] != order[2]


def test_a_start_that_fails_leaves_no_directory(tmp_path: Path) -> None:
    async def prepare(root: Path) -> None:
        (root / "half-built").write_text("x")
        raise ValueError("the template would not build")

    async def main() -> None:
        with pytest.raises(ValueError, match="would not build"):
            await ServedRun.start(RunRoot("kit", tmp_path), prepare=prepare, app=_app)

    anyio.run(main)
    assert list(tmp_path.iterdir()) == []


def test_current_run_allows_one_start_until_stop_and_no_provision_outside_it(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        current: CurrentRun[Released] = CurrentRun("KitProvider")
        with pytest.raises(RuntimeError, match=r"KitProvider\.provision\(\) before start\(\)"):
            current.started()
        await current.stop()  # nothing to stop: a no-op
        assert current.live() == []

        run = await current.start(RunRoot("kit", tmp_path))
        with pytest.raises(RuntimeError, match=r"KitProvider\.start\(\) called twice"):
            await current.start(RunRoot("kit", tmp_path))
        started, root = current.started()
        assert started is run and root == run.root and root.is_dir()
        released: list[str] = []

        async def release() -> None:
            released.append("released")

        run.live.add("ep", Released(release))
        assert len(current.live()) == 1

        await current.stop()
        await current.stop()
        assert released == ["released"] and not root.exists() and current.run is None
        with pytest.raises(RuntimeError, match="before start"):
            current.started()
        again = await current.start(RunRoot("kit", tmp_path))  # stopped: it may start afresh
        assert again.root is not None and again.root.is_dir() and again.root != root
        await current.stop()

    anyio.run(main)
    assert list(tmp_path.iterdir()) == []


def test_run_guard_holds_whatever_a_run_is_one_at_a_time() -> None:
    """A run that holds more than a ServedRun (MockMed's template and pooled connections):
    held only once opened, let go before it is closed, refused twice and before start."""
    said: list[str] = []

    async def main() -> None:
        guard: RunGuard[dict[str, str]] = RunGuard("PoolProvider")
        with pytest.raises(RuntimeError, match=r"PoolProvider\.provision\(\) before start\(\)"):
            guard.current()

        async def fails() -> dict[str, str]:
            raise ValueError("the server would not start")

        with pytest.raises(ValueError, match="would not start"):
            await guard.begin(fails)
        assert guard.run is None  # a failed start holds nothing: the next one may start

        async def opens() -> dict[str, str]:
            said.append("opened")
            return {"pool": "connections"}

        run = await guard.begin(opens)
        assert guard.current() is run
        with pytest.raises(RuntimeError, match=r"PoolProvider\.start\(\) called twice"):
            await guard.begin(opens)
        assert said == ["opened"]

        async def closes(closing: dict[str, str]) -> None:
            assert guard.run is None  # let go first: a provision now is refused
            said.append(f"closed {closing['pool']}")

        await guard.end(closes)
        await guard.end(closes)  # nothing held: a no-op
        assert said == ["opened", "closed connections"]
        with pytest.raises(RuntimeError, match="before start"):
            guard.current()

    anyio.run(main)


def test_a_proxied_episode_ends_its_session_proxy_product_and_folder_once(
    tmp_path: Path,
) -> None:
    """Roundup's, I Hate Money's and the --product kit's episode: a product process behind
    its own fault proxy, the arm's session, and its folder; a real one of each."""
    folder = tmp_path / "ep-1"
    folder.mkdir()

    async def main() -> None:
        product = ProductProcess(
            lambda port: [
                sys.executable,
                *("-m", "http.server", str(port), "--bind", "127.0.0.1"),
                *("--directory", str(folder)),
            ],
            ready_path="",
            log=folder / "product.log",
            label="file server",
        )
        proxy = FaultProxy(product.upstream, ProxyPlan.from_fixture({}), label="its proxy")
        episode = ProxiedEpisode(proxy, product, folder)
        await proxy.start()
        await product.start(on_port=proxy.retarget)
        site = proxy.base_url
        session = episode.session = aiohttp.ClientSession()
        async with session.get(site) as response:
            assert response.status == 200 and "product.log" in await response.text()
        pid = product.pid
        assert pid is not None

        await episode.teardown()
        assert session.closed and product.pid is None and not folder.exists()
        with pytest.raises(ProcessLookupError):  # stopped and reaped
            os.kill(pid, 0)
        with pytest.raises(aiohttp.ClientConnectionError):  # the proxy no longer listens
            await _get(site)
        await episode.teardown()  # once: a second call does nothing

    anyio.run(main)


def test_episode_channels_carry_what_the_task_offers_and_nothing_empty() -> None:
    offered = Alternatives(records={"id": "3"}, values={"priority": ("low", "urgent")})
    task = attrs.evolve(TASKS[0], fixture={"mode": "ok", **offered.channels()})
    assert episode_channels(task, "http://127.0.0.1:8123/e/t/") == {
        "base_url": "http://127.0.0.1:8123/e/t/",
        "confusable": '{"id":"3"}',
        "alternatives": '{"priority":["low","urgent"]}',
    }
    for nothing in ("", "{}", 3, None):
        bare = attrs.evolve(TASKS[0], fixture={"confusable": nothing, "alternatives": nothing})
        assert episode_channels(bare, "http://h/") == {"base_url": "http://h/"}
    assert Alternatives.from_channels(episode_channels(task, "http://h/")) == offered


def test_a_product_is_ready_only_when_the_answer_comes_from_its_own_socket(
    tmp_path: Path,
) -> None:
    """A port picked free can be taken by another server before the product binds it;
    that server's 200 used to count as the product being ready (a generated package's
    concurrent episodes then wrote into one another's product). Here the first start's
    process never binds, and a server already answers on its port: the product must
    move to a fresh port and be ready there, served by its own process."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "whose.txt").write_text("mine")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "whose.txt").write_text("the other server's")
    commands: list[int] = []

    def command(port: int) -> list[str]:
        commands.append(port)
        if len(commands) == 1:  # a product slow to bind: it has not yet when probed
            return [sys.executable, "-c", "import signal; signal.pause()"]
        serve = ("-m", "http.server", str(port), "--bind", "127.0.0.1")
        return [sys.executable, *serve, "--directory", str(tmp_path / "mine")]

    async def main() -> None:
        other = ProductProcess(
            lambda port: [
                sys.executable, *("-m", "http.server", str(port), "--bind", "127.0.0.1"),
                *("--directory", str(tmp_path / "other")),
            ],
            ready_path="whose.txt", log=tmp_path / "other.log", label="other server",
        )  # fmt: skip
        await other.start()
        product = ProductProcess(
            command, ready_path="whose.txt", log=tmp_path / "product.log", label="product"
        )
        product.port = other.port  # the race, lost: the other server holds the number
        moved: list[str] = []
        try:
            await product.start(on_port=moved.append)
            assert len(commands) == 2 and commands[0] == other.port != commands[1]
            assert moved == [product.upstream] and product.port == commands[1]
            assert await _text(product.upstream + "whose.txt") == "mine"
        finally:
            await product.stop()
            await other.stop()

    anyio.run(main)


async def _text(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.text()
