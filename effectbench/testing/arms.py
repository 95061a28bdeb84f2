"""Small arms for tests: one that submits the task's solution, and ones that halt, sleep,
raise or hang, to drive each path of the harness on purpose."""

from __future__ import annotations

from collections.abc import Mapping

import anyio

from effectbench.core.arm import TaskView
from effectbench.core.model import AgentReport, JSONScalar
from effectbench.core.provider import EnvHandle

__all__ = ["HangingArm", "NoopArm", "RaisingArm", "ScriptedArm", "SleepArm"]


class ScriptedArm:
    """Submits ``values`` (default: the task's resolved solution) ``times`` times through
    the product's driver, records each as a ``submit`` action, and reports what the last
    screen said: the behaviour of an agent that trusts the screen."""

    name: str = "scripted"
    values: Mapping[str, JSONScalar] | None = None
    times: int = 1
    # Class defaults, so a subclass with its own __init__ (or attrs) still works.

    def __init__(
        self,
        values: Mapping[str, JSONScalar] | None = None,
        *,
        times: int = 1,
        name: str | None = None,
    ) -> None:
        self.values, self.times = values, times
        if name is not None:
            self.name = name

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        values = self.values if self.values is not None else task.solution
        if env.driver is None or values is None:
            return AgentReport(reported_success=False, halted=True, message="nothing to submit")
        saved = False
        for _ in range(self.times):
            env.telemetry.action("submit", fields=len(values))
            saved = (await env.driver.submit(values)).screen_says_saved
        return AgentReport(reported_success=saved, halted=not saved)


class NoopArm:
    """Halts at once: the cheapest possible episode."""

    name = "noop"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        return AgentReport(reported_success=False, halted=True)


class SleepArm:
    """Sleeps (simulated agent latency), then halts."""

    name = "sleep"

    def __init__(self, seconds: float = 1.0) -> None:
        self.seconds = seconds

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        await anyio.sleep(self.seconds)
        return AgentReport(reported_success=False, halted=True)


class RaisingArm:
    """Records one action, then raises: an agent failure."""

    name = "raising"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        env.telemetry.action("click", target="save")
        raise RuntimeError("the agent crashed")


class HangingArm:
    """Never returns: only ``--episode-timeout`` ends it."""

    name = "hanging"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")
