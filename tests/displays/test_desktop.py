"""The desktop substrate end to end: MockMed's GTK client on a real Xvfb, read and driven
through its accessibility tree, scored by the real CLI; and nothing of it survives a
SIGKILLed harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from effectbench_mockmed.anchor import PINNED
from effectbench_mockmed.packs_substrates import SUBSTRATE_TASKS, MockMedSubstratesProvider
from substrate_runs import killed_run_survivors, rate

from effectbench.core.model import Substrate, trial_params
from effectbench.displays.desktop import DESKTOP_CHANNEL, DesktopChannel
from effectbench.testing import run_cli

DESKTOP_TASKS = "mockmed-substrates::desktop::*"
DISPLAY_PROCESSES = ("Xvfb", "dbus-daemon", "at-spi2-registr")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _task(mode: str, substrate: Substrate = Substrate.DESKTOP) -> Any:
    return next(
        t for t in SUBSTRATE_TASKS if t.substrate is substrate and t.fixture["mode"] == mode
    )


@pytest.mark.anyio
async def test_the_desktop_channel_is_the_clients_tree_and_acts_on_it(tmp_path: Path) -> None:
    provider = MockMedSubstratesProvider(tmp_root=tmp_path)
    await provider.start()
    try:
        task = _task("session")
        episode = await provider.provision(task, 0, trial_params(task, 0))
        try:
            assert set(episode.env.channels) == {DESKTOP_CHANNEL}  # no URL, no page
            assert episode.gone is not None and episode.gone() is None
            channel = DesktopChannel.from_channels(episode.env.channels)
            assert channel is not None and channel.display.startswith(":")
            assert DesktopChannel.from_channels({DESKTOP_CHANNEL: "{"}) is None
            bus, app = await channel.connect(), channel.application
            try:
                tree = await bus.tree(app)
                frame = tree.find(role="frame")
                assert frame is not None and frame.name == "MockMed encounters"
                patient = tree.find(role="combo box", name="Patient")
                assert patient is not None and patient.value == "Ada Moreau (referred) — p1"
                items = [n.name for n in patient.walk() if n.role == "menu item"]
                assert items == ["Ada Moreau (referred) — p1", "Ada Morel — p2"]
                note = tree.find(role="text", name="Note")
                assert note is not None and "editable" in note.states and note.value == ""
                save = tree.find(role="push button", name="Save")
                assert save is not None and "click" in save.actions
                assert "sensitive" in save.states
                banner = tree.find(accessible_id="banner")
                assert banner is not None and banner.name == "" and banner.description == ""

                await bus.select(patient, 1)
                await bus.set_text(note, "typed through AT-SPI")
                await bus.do_action(save, "click")
                with anyio.fail_after(30):
                    while not (shown := await bus.node(banner.ref)).description:
                        await anyio.sleep(0.01)
                # the session mode's banner, exactly as the web page shows it
                assert (shown.name, shown.description) == (
                    "Your session expired; sign in again",
                    "error",
                )
                after = orjson.loads(orjson.dumps((await bus.tree(app)).as_json()))
                fields = ("combo box", "text")
                shown_values = {n["name"]: n["value"] for n in _flat(after) if n["role"] in fields}
                assert shown_values["Patient"] == "Ada Morel — p2"
                assert shown_values["Note"] == "typed through AT-SPI"
            finally:
                await bus.close()
        finally:
            await episode.teardown()
    finally:
        await provider.stop()


def _flat(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("children", ()) for n in _flat(child))]


def _per_mode(run: Path, arm: str) -> dict[str, dict[str, int]]:
    """How often each task mode ended in each outcome, for ``arm``."""
    out: dict[str, dict[str, int]] = {}
    for line in (run / "results.jsonl").read_bytes().splitlines():
        row = orjson.loads(line)
        if row["arm"] == arm:
            counts = out.setdefault(row["task_id"].rsplit("::", 1)[1], {})
            counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    return out


def _run(out: Path, concurrency: int) -> dict[str, Any]:
    proc = run_cli(
        "run", "--provider", "mockmed-substrates", "--task", DESKTOP_TASKS,
        "--arm", "screen_only", "--arm", "effect_verified", "--trials", "10",
        "--concurrency", str(concurrency), "--out", str(out), "--no-report",
        cwd=out.parent, timeout=480,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    metrics: dict[str, Any] = orjson.loads((out / "metrics.json").read_bytes())
    return metrics


@pytest.mark.timeout(600)
def test_the_desktop_anchor_reproduces_the_pinned_figures_at_8(tmp_path: Path) -> None:
    """The anchor's own 90 episodes an arm, at concurrency 8. Concurrency 1 and the
    identity of both are tests/displays/test_remote_display.py's, over all 27 tasks."""
    metrics = _run(tmp_path / "c8", 8)
    so, ev = metrics["arms"]["screen_only"], metrics["arms"]["effect_verified"]
    assert rate(so["swer"]) == (PINNED["screen_only"].swer, 90) == (50, 90)
    assert rate(so["swer_wrong_write"]) == (40, 90)
    assert rate(so["swer_phantom"]) == (10, 90)
    assert rate(so["screen_success"]) == (70, 90)
    assert rate(ev["swer"]) == (0, 90) and rate(ev["task_success"]) == (30, 90)
    assert {c["substrate"] for c in so["cells"]} == {"desktop"}
    assert not any(so["failure_counts"].values()) and not any(ev["failure_counts"].values())
    # every mode's ten trials alike: the counts are the pinned per-mode outcomes, ten each
    for arm in ("screen_only", "effect_verified"):
        pinned = {mode: {outcome: 10} for mode, outcome in PINNED[arm].per_mode.items()}
        assert _per_mode(tmp_path / "c8", arm) == pinned, arm
    # every episode's window after its save, stored by content hash and chained
    events = (tmp_path / "c8" / "events.jsonl").read_bytes().splitlines()
    shots = [orjson.loads(e) for e in events if b'"episode.screenshot"' in e]
    assert len(shots) == 180
    verified = run_cli("verify", str(tmp_path / "c8"), cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.timeout(180)
def test_a_killed_run_leaves_no_display_bus_or_desktop_client(tmp_path: Path) -> None:
    assert killed_run_survivors(tmp_path, DESKTOP_TASKS, DISPLAY_PROCESSES) == []


@pytest.mark.anyio
async def test_an_interpreter_without_gtk_gets_one_line_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from effectbench_mockmed import packs_substrates

    monkeypatch.setattr(packs_substrates, "SYSTEM_PYTHON", sys.executable)  # no gi in it
    provider = MockMedSubstratesProvider(tmp_root=tmp_path)
    await provider.start()
    try:
        task = _task("ok")
        with pytest.raises(packs_substrates.DesktopUnavailable) as caught:
            await provider.provision(task, 0, trial_params(task, 0))
    finally:
        await provider.stop()
    message = str(caught.value)
    assert "\n" not in message and "apt-get install python3-gi gir1.2-gtk-3.0" in message
