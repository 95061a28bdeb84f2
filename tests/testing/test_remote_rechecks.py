"""The pixels-only stand-in waits for a late screen before it halts (issue 28, item 6).

On a loaded machine the desktop client can repaint after the arm's capture already found
the screen quiet, so the screenshot after an action may not show it yet. The stand-in's
remote script must wait through ``RECHECKS`` such screens, then halt saying why; these
run the script on plain grey frames (a stale screen: nothing opened, nothing typed).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from effectbench.displays.frame import Frame
from effectbench.testing.computer_use.answer import Answer
from effectbench.testing.computer_use.remote import RECHECKS, Form, trust_banner

PAYLOAD = {"note": "follow-up in two weeks", "record_key": "ref-b16e"}
PROMPT = (
    f"Patient P001: Record a followup encounter. Payload (JSON): {orjson.dumps(PAYLOAD).decode()}"
)


def _grey() -> bytes:
    return Frame(320, 200, bytes([200, 200, 200, 0]) * (320 * 200)).png()


def _form() -> dict[str, Any]:
    box = (10, 10, 60, 20)
    fields = ("patient_id", "type", "note", "key")
    form = Form.from_plain(
        {"heading": box, "save": (200, 150, 40, 20), "labels": dict.fromkeys(fields, box),
         "widgets": {f: (100, 40 + 25 * i, 100, 20) for i, f in enumerate(fields)}}
    )  # fmt: skip
    return form.plain()


def _run(first: dict[str, Any]) -> list[Answer]:
    """The script's answers from ``first`` on, each sent a fresh stale screen."""
    notes: list[dict[str, Any]] = [first]
    images = [_grey(), _grey()]
    answers: list[Answer] = []
    while not answers or answers[-1].actions[-1][0] != "done":
        answer = trust_banner(PROMPT, notes, images[-3:])
        answers.append(answer)
        notes.append(dict(answer.note))
        images.append(_grey())
    return answers


@pytest.mark.parametrize(
    ("first", "halt"),
    [
        ({"step": "choose", "field": "type"}, "changed nothing on the screen"),
        ({"step": "fill", "form": _form()}, "does not show what I put in"),
    ],
)
def test_a_stale_screen_is_waited_for_then_the_script_halts(
    first: dict[str, Any], halt: str
) -> None:
    answers = _run(first)
    waits, last = answers[:-1], answers[-1]
    assert [a.actions for a in waits] == [(("wait", {"ms": 500}),)] * RECHECKS
    assert RECHECKS >= 2  # one late repaint and a second for a slower one
    name, args = last.actions[-1]
    assert (name, args["success"]) == ("done", False)
    assert halt in args["message"]
