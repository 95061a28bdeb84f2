"""An arm for the Dask executor's tests, imported by reference on the workers.

``BarrierArm`` marks itself in flight (a file naming the worker's pid and the episode)
and waits, polling with a bounded deadline, until the test creates ``go``: so a test can
kill a worker while it holds episodes, without sleeping to order anything."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio

from effectbench.arm import TaskView
from effectbench.model import AgentReport

BARRIER_ENV = "EFFECTBENCH_TEST_BARRIER"
DEADLINE_S = 120.0


class BarrierArm:
    name = "barrier"

    async def run(self, task: TaskView, env: object) -> AgentReport:
        where = Path(os.environ[BARRIER_ENV])
        (where / f"inflight-{os.getpid()}-{task.episode_id.replace(':', '_')}").touch()
        deadline = time.monotonic() + DEADLINE_S
        while not (where / "go").exists() and time.monotonic() < deadline:
            await anyio.sleep(0.02)
        return AgentReport(reported_success=False, halted=True, message="barrier")


class ProductAfterBarrierArm(BarrierArm):
    """A ``BarrierArm`` that reads the product back once it is let go, so a product whose
    database died meanwhile fails the request (and logs its traceback)."""

    name = "barrier_product"

    async def run(self, task: TaskView, env: object) -> AgentReport:
        report = await super().run(task, env)
        verifier = getattr(env, "verifier", None)
        if verifier is not None:
            await verifier.read()
        return report


class PageAfterBarrierArm(BarrierArm):
    """A ``BarrierArm`` that, once let go, fetches the product's page over HTTP and fails
    when it cannot: an agent whose product died under it."""

    name = "barrier_page"

    async def run(self, task: TaskView, env: object) -> AgentReport:
        import aiohttp

        report = await super().run(task, env)
        url = env.channels["base_url"]  # type: ignore[attr-defined]
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            resp.raise_for_status()
        return report


class BrowserAfterBarrierArm(BarrierArm):
    """A browser arm that, once let go, loads the product in its page: a Chromium that
    died meanwhile fails it."""

    name = "barrier_browser"
    uses_browser = True

    async def run(self, task: TaskView, env: object) -> AgentReport:
        report = await super().run(task, env)
        await env.browser.goto(env.channels["base_url"])  # type: ignore[attr-defined]
        return report
