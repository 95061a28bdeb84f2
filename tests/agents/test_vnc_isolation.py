"""A contained agent on a remote_display episode reaches its VNC port and nothing else:
not the product's HTTP port, not a DevTools port, not the display's accessibility bus,
not its X server (path or abstract socket). Real Xvnc, real bubblewrap, a real hostile
agent (tests/agents/vnc_probe_agent.py), per-episode and long-lived."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from loopback import loopback_listener

from effectbench.agents import ExecArm
from effectbench.agents.reference import system_python
from effectbench.core.arm import TaskView
from effectbench.core.model import Substrate
from effectbench.core.provider import EnvHandle
from effectbench.displays import Display, DisplayPool
from effectbench.displays.vnc import serve_vnc

pytestmark = pytest.mark.anyio

PROBE = Path(__file__).with_name("vnc_probe_agent.py")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _task(ep: str, display: Display, http: int, cdp: int) -> TaskView:
    assert display.a11y_bus is not None
    params = {
        "http_port": str(http),
        "cdp_port": str(cdp),
        "a11y_bus": display.a11y_bus.split("=", 1)[1].split(",")[0],
        "x_socket": str(display.x_socket),
        "x_abstract": str(display.x_socket),
    }
    return TaskView(ep, "probe", Substrate.REMOTE_DISPLAY, params, None, None, 0)


async def _probe(mode: str, *, with_vnc: bool) -> list[dict[str, Any]]:
    arm = ExecArm([system_python(), str(PROBE)], name="probe", mode=mode, isolate=True)  # type: ignore[arg-type]
    assert arm.execution == "isolated"
    pool = DisplayPool(displays=2, vnc=True)
    await pool.start()
    found: list[dict[str, Any]] = []
    try:
        async with (
            loopback_listener() as http,
            loopback_listener() as cdp,
            arm.lifespan(),
            pool.episode() as one,
            pool.episode() as two,
            serve_vnc(one) as vnc_one,
            serve_vnc(two) as vnc_two,
        ):

            async def episode(i: int, display: Display, channels: dict[str, str]) -> None:
                env = EnvHandle(channels=channels if with_vnc else {"base_url": "x"})
                report = await arm.run(_task(f"probe::t{i}", display, http, cdp), env)
                found.append(orjson.loads(report.message))

            async with anyio.create_task_group() as tg:
                tg.start_soon(episode, 0, one, vnc_one.channels())
                tg.start_soon(episode, 1, two, vnc_two.channels())
    finally:
        await pool.stop()
    assert len(found) == 2
    return found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["per_episode", "shared"])
async def test_a_contained_agent_reaches_its_vnc_port_and_nothing_else(mode: str) -> None:
    for found in await _probe(mode, with_vnc=True):
        assert found["vnc"] == "RFB 003.008\n", found
        assert found["channels"] == ["vnc"]
        assert not any(found[k] for k in ("http", "cdp", "a11y_bus", "x_socket", "x_abstract"))


@pytest.mark.timeout(120)
async def test_without_a_vnc_channel_the_same_probes_reach_the_hosts_loopback() -> None:
    """The probes are real: on the host's network (a web episode) the ports answer."""
    for found in await _probe("per_episode", with_vnc=False):
        assert found["http"] and found["cdp"] and found["x_abstract"]
        assert not found["a11y_bus"] and not found["x_socket"]  # never mounted
