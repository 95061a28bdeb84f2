"""The computer_use arm on a remote display: a real GTK window in a real Xvnc, reached only
through the episode's ``vnc`` channel, driven by the stand-in model over the wire formats.

The stand-in has no sight here (``follow-steps`` performs the steps the task lists, at
coordinates the test read off the framebuffer by OCR), so what is checked is the arm's
screen: the model is shown the framebuffer at its own size, and its clicks and keys land
on the remote window, which the test then reads back from pixels.
"""

from __future__ import annotations

import orjson
import pytest

from effectbench.arms.computer_use import ComputerUseArm
from effectbench.arms.computer_use.vnc_screen import combo_keysyms
from effectbench.core.arm import TaskView
from effectbench.core.model import Substrate
from effectbench.core.provider import EnvHandle, Telemetry
from effectbench.displays.pixels import Screen
from effectbench.displays.vnc import VncChannel
from effectbench.serve import LocalServer
from effectbench.testing.computer_use import Sight, StandIn

pytestmark = pytest.mark.anyio


def test_chords_become_keysyms_modifiers_first() -> None:
    assert combo_keysyms("Control+a") == [0xFFE3, ord("a")]
    assert combo_keysyms("Shift+Tab") == [0xFFE1, 0xFF09]
    assert combo_keysyms("Enter") == [0xFF0D]
    assert combo_keysyms("+") == [ord("+")]
    assert combo_keysyms("F5") == [0xFFC2]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_the_arm_sees_the_framebuffer_and_acts_on_the_remote_window(
    remote_form: tuple[VncChannel, Screen], wire: str
) -> None:
    channel, view = remote_form
    label = await view.wait_for("Triage note", timeout_s=30)
    save = (await view.read()).find("Save")
    assert save is not None
    steps = [
        {"action": "click", "x": label.right + 60, "y": label.center[1]},
        {"action": "type", "text": "hello 42"},
        {"action": "key", "combo": "ctrl+a"},  # a chord through RFB: selects the entry's text
        {"action": "type", "text": "seen 7"},  # typed over the selection
        {"action": "click", "x": save.center[0], "y": save.center[1]},
    ]
    task = TaskView(
        episode_id=f"cu::remote::{wire}",
        goal=f"Fill the form. Steps (JSON): {orjson.dumps(steps).decode()}",
        substrate=Substrate.REMOTE_DISPLAY,
        params={},
        effect=None,
        solution=None,
        trial=0,
    )
    standin = StandIn(Sight())
    local = LocalServer(standin.app)
    await local.start()
    try:
        arm = ComputerUseArm(
            base_url=f"http://127.0.0.1:{local.port}/v1", model="follow-steps", api_key="k",
            wire_format=wire, environ={},
        )  # fmt: skip
        telemetry = Telemetry()
        # no browser, no base URL: the vnc channel is all the episode offers
        report = await arm.run(task, EnvHandle(channels=channel.channels(), telemetry=telemetry))
    finally:
        await local.stop()
    assert report.reported_success, report.message
    frame = view.client.frame
    first = telemetry.actions[0]
    assert (first.kind, first.detail) == (
        "viewport",
        {"width": frame.width, "height": frame.height},
    )
    done = [a.detail.get("action") for a in telemetry.actions if a.kind == "computer"]
    assert done[:5] == ["click", "type", "key", "type", "click"]
    assert all(a.detail.get("ok", True) for a in telemetry.actions if a.kind == "computer")
    assert telemetry.screenshots and telemetry.screenshots[0].label.startswith("turn 0")
    assert await view.wait_for("Saved: seen 7")
