"""A contained agent on a desktop episode reaches its own accessibility bus, at the
address its ``desktop`` channel names, and nothing else: not the product's HTTP port, a
DevTools port, the display's X socket (path or abstract) or session bus, nor another
episode's bus. Real MockMed episodes (Xvfb, buses, the GTK client), real bubblewrap, a
real hostile agent (tests/agents/desktop_probe_agent.py), per-episode and long-lived;
and the same probes uncontained, which reach each target, so the probes are real. And a
contained agent (tests/agents/desktop_agent.py) works the desktop anchor through its bus
and scores as the anchor pins."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import orjson
import pytest
from effectbench_mockmed.anchor import PINNED
from effectbench_mockmed.packs_substrates import SUBSTRATE_TASKS, MockMedSubstratesProvider
from loopback import loopback_listener

from effectbench.agents import ExecArm
from effectbench.agents.door import SOCKETS_IN_SANDBOX
from effectbench.core.arm import TaskView
from effectbench.core.model import Substrate, TaskSpec, trial_params
from effectbench.core.provider import EnvHandle
from effectbench.displays.bus_relay import unix_path
from effectbench.displays.desktop import DesktopChannel
from effectbench.displays.vnc import MAX_CONNECTIONS
from effectbench.testing import run_cli

pytestmark = pytest.mark.anyio

PROBE = Path(__file__).with_name("desktop_probe_agent.py")
AGENT = Path(__file__).with_name("desktop_agent.py")
FRAME = "MockMed encounters"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _spec(substrate: Substrate) -> TaskSpec:
    return next(t for t in SUBSTRATE_TASKS if t.substrate is substrate)


def _bus(env: EnvHandle) -> str:
    channel = DesktopChannel.from_channels(env.channels)
    assert channel is not None
    return unix_path(channel.a11y_bus)


def _targets(env: EnvHandle, others: list[EnvHandle], http: int, cdp: int) -> dict[str, str]:
    """Where the probe aims: the host's sockets and ports of this episode's display and
    product, and the other episodes' buses."""
    channel = DesktopChannel.from_channels(env.channels)
    assert channel is not None
    x_socket = f"/tmp/.X11-unix/X{channel.display.removeprefix(':')}"
    return {
        "http_port": str(http),
        "cdp_port": str(cdp),
        "x_socket": x_socket,
        "x_abstract": x_socket,
        "session_bus": str(Path(_bus(env)).with_name("session")),
        "own_bus": _bus(env),
        "other_buses": "|".join(_bus(o) for o in others),
        "crowd": str(MAX_CONNECTIONS + 1),
    }


async def _probe(tmp_path: Path, mode: str, *, isolate: bool) -> list[dict[str, Any]]:
    """Two episodes of the probe agent at once, and a third desktop episode (another
    arm's, say) whose bus it is told of too; what each episode's probe reached."""
    command = [sys.executable, str(PROBE)]
    arm = ExecArm(command, name="probe", mode=mode, isolate=isolate)  # type: ignore[arg-type]
    assert arm.execution == ("isolated" if isolate else "subprocess")
    provider = MockMedSubstratesProvider(tmp_root=tmp_path)
    await provider.start()
    found: list[dict[str, Any]] = []
    try:
        async with AsyncExitStack() as stack:
            web_spec, spec = _spec(Substrate.WEB), _spec(Substrate.DESKTOP)
            web = await provider.provision(web_spec, 0, trial_params(web_spec, 0))
            stack.push_async_callback(web.teardown)
            episodes = []
            for trial in range(3):
                episode = await provider.provision(spec, trial, trial_params(spec, trial))
                stack.push_async_callback(episode.teardown)
                episodes.append(episode.env)
            http = urlsplit(web.env.channels["base_url"]).port
            assert http is not None
            cdp = await stack.enter_async_context(loopback_listener())
            await stack.enter_async_context(arm.lifespan())

            async def run(i: int) -> None:
                env = episodes[i]
                targets = _targets(env, [e for e in episodes if e is not env], http, cdp)
                view = TaskView(f"probe::t{i}", "probe", Substrate.DESKTOP, targets, None, None, i)
                report = await arm.run(view, env)
                found.append(orjson.loads(report.message))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, 0)
                tg.start_soon(run, 1)
    finally:
        await provider.stop()
    assert len(found) == 2
    return found


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["per_episode", "shared"])
async def test_a_contained_agent_reaches_its_own_accessibility_bus_and_nothing_else(
    tmp_path: Path, mode: str
) -> None:
    found = await _probe(tmp_path, mode, isolate=True)
    for probe in found:
        assert probe["channels"] == ["desktop"]
        ways_out = ("http", "cdp", "x_socket", "x_abstract", "session_bus")
        assert not any(probe[k] for k in ways_out), probe
        assert probe["other_buses"] == [False, False], probe  # the other two episodes'
        assert not probe["own_bus_by_host_path"], probe  # only through its relay
        bus = probe["bus"]
        assert bus["address"].startswith(f"unix:path={SOCKETS_IN_SANDBOX}/"), bus
        assert bus["frame"] == FRAME and bus["nodes"] > 10, bus
        assert bus["is_the_channels_app"] is True, bus
        # the relay holds 8 connections at once and closes the ninth (no fds exhausted)
        assert probe["crowd"] == ["OK"] * MAX_CONNECTIONS + [""], probe
    if mode == "shared":  # one process, one door: a relay socket for each episode's bus
        assert found[0]["bus"]["address"] != found[1]["bus"]["address"]


@pytest.mark.timeout(180)
async def test_uncontained_the_same_probes_reach_every_target(tmp_path: Path) -> None:
    """The probes are real: a plain subprocess reaches each target the sandbox cuts."""
    for probe in await _probe(tmp_path, "per_episode", isolate=False):
        assert all(probe[k] for k in ("http", "cdp", "x_socket", "x_abstract", "session_bus"))
        assert probe["other_buses"] == [True, True] and probe["own_bus_by_host_path"], probe
        assert probe["bus"]["frame"] == FRAME and probe["bus"]["is_the_channels_app"] is True


@pytest.mark.timeout(300)
@pytest.mark.parametrize("prefix", ["exec:", "exec-each:"])
def test_a_contained_agent_works_the_desktop_anchor_through_its_bus(
    tmp_path: Path, prefix: str
) -> None:
    """tests/agents/desktop_agent.py, contained, fills the form, presses Save and reads
    the banner over AT-SPI on each of the anchor's nine desktop tasks: every episode
    scores as the anchor pins screen_only's, and the run verifies as isolated."""
    out = tmp_path / "run"
    proc = run_cli(
        "run", "--provider", "mockmed-substrates", "--task", "mockmed-substrates::desktop::*",
        "--arm", f"agent={prefix}{sys.executable} {AGENT}", "--isolate", "--trials", "1",
        "--concurrency", "3", "--out", str(out), "--no-report", "-q",
        cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    outcomes = {row["task_id"].rsplit("::", 1)[1]: row["outcome"] for row in rows}
    failures = [(r["task_id"], r["failure_class"]) for r in rows if r["failure_class"]]
    assert outcomes == dict(PINNED["screen_only"].per_mode), (failures, proc.stderr[-2000:])
    assert all(r["telemetry"]["actions"] == 1 for r in rows)  # its submit_form, logged
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["execution"] == {"agent": "isolated"}
    verified = run_cli("verify", "--require-isolated", str(out), cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
