"""The pixels-only toolkit on a real GTK window in a real Xvnc: read its text, click
its entry and its button, type, and read the result, from the framebuffer alone."""

from __future__ import annotations

import pytest

from effectbench.displays.frame import Box
from effectbench.displays.pixels import NotOnScreen, Screen, find_template
from effectbench.displays.vnc import VncChannel

pytestmark = pytest.mark.anyio


@pytest.fixture
def screen(remote_form: tuple[VncChannel, Screen]) -> Screen:
    return remote_form[1]


async def test_read_click_type_and_read_the_result(screen: Screen) -> None:
    label = await screen.wait_for("Triage note", timeout_s=30)
    first = await screen.read()
    assert first.find("Save") is not None and first.find("Nothing saved") is not None
    # The entry is the field right of its label, on the label's line.
    await screen.click(label.right + 60, label.center[1])
    await screen.type("hello 42")
    await screen.click_text("Save")
    saved = await screen.wait_for("Saved: hello 42")
    assert saved.y > label.y
    assert screen.cost.reads >= 3 and screen.cost.seconds > 0


async def test_a_template_cut_from_one_frame_is_found_in_a_later_one(screen: Screen) -> None:
    button = await screen.wait_for("Save", timeout_s=30)
    before = await screen.settle()
    template = before.crop(Box(button.x - 4, button.y - 2, button.width + 8, button.height + 4))
    await screen.click(button.center[0], button.center[1] - 60)  # the window, not the button
    after = await screen.settle()
    found = find_template(after, template)
    assert found is not None and (found.x, found.y) == (button.x - 4, button.y - 2)
    assert find_template(after, after.crop(Box(0, 0, 1, 1))) == Box(0, 0, 1, 1)


async def test_what_is_not_on_screen_says_what_was_read(screen: Screen) -> None:
    await screen.wait_for("Triage note", timeout_s=30)
    with pytest.raises(NotOnScreen, match=r"'Discharged' was not on the screen .*Triage note"):
        await screen.wait_for("Discharged", timeout_s=1.0)
