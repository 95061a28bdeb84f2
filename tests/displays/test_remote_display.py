"""The remote_display substrate end to end: MockMed's GTK client on a real Xvnc, seen
and driven through its VNC channel alone (pixels in, pointer and keys out); the whole
27-task pack (web, desktop and remote_display) scored by the real CLI at concurrency 1
and 8, its framebuffer evidence checked by verify; and nothing of it survives a
SIGKILLed harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from effectbench_mockmed.anchor import PINNED
from effectbench_mockmed.packs_substrates import SUBSTRATE_TASKS, MockMedSubstratesProvider
from effectbench_mockmed.remote.driver import RemoteFormDriver
from substrate_runs import killed_run_survivors, outcomes

from effectbench.agents.reference import system_python
from effectbench.core.model import Substrate, trial_params
from effectbench.core.provider import Telemetry
from effectbench.displays.vnc import VNC_CHANNEL, VncChannel
from effectbench.testing import run_cli
from effectbench.verify import verify_run

REMOTE_TASKS = "mockmed-substrates::remote_display::*"
TRIALS = {1: 1, 8: 2}
"""Trials at each concurrency. MockMed is deterministic: each trial of a mode has the
same outcome, so one trial holds every mode's outcome and the pinned rates scale
(bench/substrates.py runs 10); concurrency 1 runs one (its remote episodes are the
slowest part of the suite), 8 runs two and must count exactly twice as many of each."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _task(mode: str) -> Any:
    return next(
        t
        for t in SUBSTRATE_TASKS
        if t.substrate is Substrate.REMOTE_DISPLAY and t.fixture["mode"] == mode
    )


@pytest.mark.anyio
async def test_the_arm_gets_only_vnc_and_the_pixels_driver_reads_the_banner(
    tmp_path: Path,
) -> None:
    provider = MockMedSubstratesProvider(tmp_root=tmp_path)
    await provider.start()
    try:
        task = _task("session")
        episode = await provider.provision(task, 0, trial_params(task, 0))
        try:
            assert set(episode.env.channels) == {VNC_CHANNEL}  # no URL, no tree, no page
            channel = VncChannel.from_channels(episode.env.channels)
            assert channel is not None and channel.host == "127.0.0.1"
            telemetry = Telemetry()
            driver = RemoteFormDriver(channel, telemetry)
            values = {"patient_id": "p2", "type": "Triage", "note": "typed over VNC", "key": "k-1"}
            shown = await driver.submit(values)
            # the session mode's banner, read off the framebuffer: red, and its words
            assert not shown.screen_says_saved
            assert "session expired" in shown.message.casefold()
            assert [s.label for s in telemetry.screenshots] == ["filled form", "after save"]
            assert all(s.png.startswith(b"\x89PNG") for s in telemetry.screenshots)
        finally:
            await episode.teardown()
    finally:
        await provider.stop()


def _run(out: Path, concurrency: int) -> dict[str, Any]:
    """The whole pack: the anchor's nine tasks on every substrate, in one run."""
    proc = run_cli(
        "run", "--provider", "mockmed-substrates",
        "--arm", "screen_only", "--arm", "effect_verified",
        "--trials", str(TRIALS[concurrency]),
        "--concurrency", str(concurrency), "--out", str(out), "--no-report",
        cwd=out.parent, timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    metrics: dict[str, Any] = orjson.loads((out / "metrics.json").read_bytes())
    return metrics


def _scaled(count: int, trials: int) -> tuple[int, int]:
    """A pinned count of 90 episodes (10 trials) for ``trials`` trials."""
    return count * trials // 10, 9 * trials


def _times(counts: object, k: int) -> object:
    """Outcome counts (nested in dicts, lists and tuples) multiplied by ``k``."""
    if isinstance(counts, dict):
        return {key: _times(v, k) for key, v in counts.items()}
    if isinstance(counts, list | tuple):
        return [_times(v, k) for v in counts]
    return counts * k if isinstance(counts, int) else counts


def _on(block: dict[str, Any], metric: str, substrate: str) -> tuple[int, int]:
    """An arm's ``metric`` over the cells of one substrate."""
    cells = [c[metric] for c in block["cells"] if c["substrate"] == substrate]
    return sum(c["numerator"] for c in cells), sum(c["denominator"] for c in cells)


@pytest.mark.timeout(900)
def test_the_27_task_anchor_reproduces_the_pinned_figures_per_substrate_at_1_and_8(
    tmp_path: Path,
) -> None:
    one = _run(tmp_path / "c1", 1)
    eight = _run(tmp_path / "c8", 8)
    so_pinned, ev_pinned = PINNED["screen_only"], PINNED["effect_verified"]
    for metrics, trials in ((one, TRIALS[1]), (eight, TRIALS[8])):
        so, ev = metrics["arms"]["screen_only"], metrics["arms"]["effect_verified"]
        assert not any(so["failure_counts"].values()) and not any(ev["failure_counts"].values())
        for substrate in ("web", "desktop", "remote_display"):
            assert _on(so, "swer", substrate) == _scaled(so_pinned.swer, trials)
            assert _scaled(so_pinned.swer, trials) == _scaled(50, trials)
            assert _on(so, "swer_wrong_write", substrate) == _scaled(40, trials)
            assert _on(so, "swer_phantom", substrate) == _scaled(10, trials)
            want = _scaled(so_pinned.screen_success, trials)
            assert _on(so, "screen_success", substrate) == want
            assert _on(ev, "swer", substrate) == _scaled(0, trials)
            want = _scaled(ev_pinned.task_success, trials)
            assert _on(ev, "task_success", substrate) == want
    # identical at both: every cell's counts at 8 are exactly those at 1, once per trial
    assert _times(outcomes(one), TRIALS[8] // TRIALS[1]) == _times(outcomes(eight), 1)
    summary = (tmp_path / "c8" / "summary.md").read_text()
    assert "| category | web | desktop | remote_display |" in summary

    # the framebuffer evidence: every remote episode's screens stored by hash, and
    # checked by verify
    run = tmp_path / "c8"
    events = [orjson.loads(line) for line in (run / "events.jsonl").read_bytes().splitlines()]
    shots = [e for e in events if e["type"] == "episode.screenshot"]
    remote_shots = [e["data"] for e in shots if "::remote_display::" in e["ep"]]
    remote_eps = {e["ep"] for e in shots if "::remote_display::" in e["ep"]}
    assert len(remote_eps) == 2 * 9 * TRIALS[8]
    assert len(remote_shots) == 2 * 2 * 9 * TRIALS[8]  # the filled form, the screen after Save
    assert all((run / e["data"]["path"]).read_bytes().startswith(b"\x89PNG") for e in shots)
    assert verify_run(run).ok
    edited = run / remote_shots[0]["path"]
    edited.write_bytes(edited.read_bytes()[:-8] + b"\0" * 8)
    assert not verify_run(run).ok


@pytest.mark.timeout(180)
def test_a_killed_run_leaves_no_vnc_server_bus_or_client(tmp_path: Path) -> None:
    assert killed_run_survivors(tmp_path, REMOTE_TASKS, ("Xvnc", "dbus-daemon")) == []


@pytest.mark.timeout(300)
def test_a_protocol_agent_gets_its_framebuffer_as_evidence(tmp_path: Path) -> None:
    """The harness's camera captures the agent's display over its own socket: the
    image the agent is answered with is the one logged and verified."""
    agent = Path(__file__).parents[1] / "agents" / "vnc_screenshot_agent.py"
    out = tmp_path / "run"
    proc = run_cli(
        "run", "--provider", "mockmed-substrates",
        "--task", "mockmed-substrates::remote_display::ok",
        "--arm", f"exec-each:{system_python()} {agent}", "--trials", "1",
        "--out", str(out), "--no-report", "--min-coverage", "0",
        cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    events = [orjson.loads(line) for line in (out / "events.jsonl").read_bytes().splitlines()]
    reported = next(e["data"] for e in events if e["type"] == "episode.reported")
    found = orjson.loads(reported["message"])
    assert found["greeting"] == "RFB 003.008\n"
    answer = found["answer"]
    assert answer["ok"] and answer["label"] == "agent: my screen" and answer["kept"]
    assert answer["checked"] == {"sha256": answer["sha256"], "width": 1024, "height": 720}
    shots = [e["data"] for e in events if e["type"] == "episode.screenshot"]
    assert answer["sha256"] in {s["sha256"] for s in shots}
    assert {"agent: my screen", "at report"} <= {s["label"] for s in shots}
    assert verify_run(out).ok
