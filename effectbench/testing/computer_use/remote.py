"""The stand-in's scripts where there is no page: MockMed's desktop client seen as pixels.

On a remote_display episode the arm's screen is a framebuffer (docs/computer-use.md):
there is no DOM whose layout a ``Sight`` could record, so the stand-in reads each PNG it
is sent itself, as a vision model would, with the toolkit MockMed's remote driver uses
(``effectbench.displays.ocr`` for the words, ``effectbench.displays.widgets`` for the
widget on a label's row, a list as the change between two screens and the banner's
colour). What it knows of the task comes from the messages the arm sends (the goal and
the payload, as on the web); what it does is the arm's action space only.

``trust_banner``: read the form (waiting while the window is not painted yet); a combo
box whose row does not read as the value is clicked, and in the next screenshot the item
that reads as it is clicked in the list (the list is what changed since the screenshot
before); the text fields are clicked, selected (ctrl+a) and typed; the screen must then
show the patient, the type and the note, and Save is clicked; the banner's row is read
until it holds text, and success is claimed exactly when it is green. A screen that does
not show yet what was just done is waited for (``RECHECKS``) before the script halts.
``check_records`` refuses: it claims only what a records page shows, and the desktop
client has none, so once it has read the form it halts without saving.

Each script runs in a worker thread of the stand-in's server (OCR blocks).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from effectbench.displays.frame import Box, Frame
from effectbench.displays.ocr import Reading, read_text
from effectbench.displays.widgets import (
    changed,
    item,
    looks_green,
    painted,
    right_of,
    row_below,
    said,
    shows,
)
from effectbench.testing.computer_use.answer import Act, Answer, done, last_step
from effectbench.testing.computer_use.scripts import intended, is_mockmed

__all__ = ["REMOTE_SCRIPTS", "RemoteScript", "check_records", "trust_banner"]

RemoteScript = Callable[[str, Sequence[Mapping[str, Any]], Sequence[bytes]], Answer]
"""(the task prompt, the script's earlier notes, the screenshots still in the
conversation, oldest first) -> Answer."""

HEADING: Final = "New encounter"
SAVE: Final = "Save"
LABELS: Final = {
    "patient_id": "Patient",
    "type": "Type",
    "note": "Note",
    "key": "Referral reference",
}
"""What the client shows left of each field's widget, as a person reads the window."""
COMBOS: Final = ("patient_id", "type")
TEXTS: Final = ("note", "key")
WAIT_MS: Final = 500
LOOKS: Final = 10
"""Screenshots it waits through for the form to be painted before it gives up."""
SAVE_WAITS: Final = 20
"""Screenshots it waits through for an answer to Save (the client's banner)."""
RECHECKS: Final = 3
"""Screenshots it waits through when the screen does not show yet what it just did (a
list not open, a choice or typed text not drawn): on a loaded machine the client can
repaint after the arm's capture already found the screen quiet, so a late screen is
waited for, as a person would, before the script gives up and halts."""
ALIKE: Final = 0.8
"""How alike (difflib's ratio) typed text and what OCR reads of it must be: OCR misreads
a character of a hex tag now and then (``b16e`` as ``bl6e``)."""
UNCHECKED: Final = "key"
"""The field not read back before Save: the referral reference is typed last, so its
entry has the focus, whose ring and caret defeat OCR (on the anchor's nine screens it
never read within the widgets' column, and alone twice as nothing but ``|``); it is the
client's idempotency token and carries nothing of the task's effect."""
NO_RECORDS: Final = (
    "I claim only what a records page shows, and this screen is the encounter form with "
    "no way to one: I save nothing I cannot check"
)


@attrs.frozen
class Form:
    """The form as read off one screen: the heading, Save, each field's label and
    widget (the widget on the label's row)."""

    heading: Box
    save: Box
    labels: Mapping[str, Box]
    widgets: Mapping[str, Box]

    def plain(self) -> dict[str, Any]:
        """As a note carries it (JSON)."""
        return {
            "heading": attrs.astuple(self.heading),
            "save": attrs.astuple(self.save),
            "labels": {k: attrs.astuple(b) for k, b in self.labels.items()},
            "widgets": {k: attrs.astuple(b) for k, b in self.widgets.items()},
        }

    @classmethod
    def from_plain(cls, raw: Mapping[str, Any]) -> Form:
        return cls(
            Box(*raw["heading"]),
            Box(*raw["save"]),
            {k: Box(*b) for k, b in raw["labels"].items()},
            {k: Box(*b) for k, b in raw["widgets"].items()},
        )


def _act(name: str, **args: Any) -> Act:
    return name, args


def _click(at: Box) -> Act:
    x, y = at.center
    return _act("click", x=x, y=y)


def _read_form(frame: Frame) -> tuple[Form | None, Reading]:
    """The form on ``frame`` (None when its heading, Save or a label does not read)."""
    reading = read_text(frame)
    heading, save = reading.find(HEADING), reading.find(SAVE)
    labels = {f: line.box for f, text in LABELS.items() if (line := item(reading, text))}
    if heading is None or save is None or len(labels) < len(LABELS):
        return None, reading
    widgets = {f: right_of(frame, box) for f, box in labels.items()}
    return Form(heading, save, labels, widgets), reading


def _trailing(notes: Sequence[Mapping[str, Any]], step: str) -> int:
    """How many of the last notes are ``step``."""
    count = 0
    for note in reversed(notes):
        if note.get("step") != step:
            break
        count += 1
    return count


def _look(notes: Sequence[Mapping[str, Any]], png: bytes) -> tuple[Form, Reading, Frame] | Answer:
    """The form on the latest screenshot, or a wait for it to be painted (or, after
    ``LOOKS`` waits, a halt saying what was read instead)."""
    frame = Frame.from_png(png)
    form, reading = _read_form(frame)
    if form is not None:
        return form, reading, frame
    if _trailing(notes, "look") >= LOOKS:
        return done(False, f"the screen shows no encounter form (read: {said(reading)})")
    return Answer({"step": "look"}, (_act("wait", ms=WAIT_MS),))


def _plan(prompt: str, notes: Sequence[Mapping[str, Any]], png: bytes) -> Answer:
    """Open the first combo box that does not show its value, or type the text fields."""
    looked = _look(notes, png)
    if isinstance(looked, Answer):
        return looked
    form, reading, _ = looked
    values = intended(prompt)
    chosen = {n.get("field") for n in notes if n.get("step") == "chosen"}
    for field in COMBOS:
        if shows(reading, form.labels[field], values[field]):
            continue
        if field in chosen:
            if _trailing(notes, "recheck") < RECHECKS:
                return Answer({"step": "recheck"}, (_act("wait", ms=WAIT_MS),))
            shown = f"the {LABELS[field]} box does not show {values[field]!r} after I chose it"
            return done(False, shown)
        return Answer({"step": "choose", "field": field}, (_click(form.widgets[field]),))
    acts: list[Act] = []
    for field in TEXTS:
        acts += [_click(form.widgets[field]), _act("key", combo="ctrl+a")]
        acts.append(_act("type", text=values[field]))
    return Answer({"step": "fill", "form": form.plain()}, tuple(acts))


def _choose(prompt: str, note: Mapping[str, Any], images: Sequence[bytes]) -> Answer:
    """In the list the last click opened (what changed since the screenshot before it),
    click the item that reads as the field's value; wait for a list not drawn yet."""
    field = str(note["field"])
    value, label = intended(prompt)[field], LABELS[field]
    waited = int(note.get("waited", 0))
    if len(images) < 2:
        return done(False, f"I no longer see the screen from before I opened the {label} box")
    # the screenshot before the click; while waiting, each one in between showed no list
    before = Frame.from_png(images[max(0, len(images) - 2 - waited)])
    after = Frame.from_png(images[-1])
    opened = changed(before, after)
    reading = read_text(after, opened) if opened is not None else None
    chosen = item(reading, value) if reading is not None else None
    if chosen is not None:
        return Answer({"step": "chosen", "field": field}, (_click(chosen.box),))
    if waited < RECHECKS:
        return Answer({**note, "waited": waited + 1}, (_act("wait", ms=WAIT_MS),))
    if reading is None:
        return done(False, f"clicking the {label} box changed nothing on the screen")
    halt = done(False, f"the {label} list offers no {value!r} (read: {said(reading)})")
    return Answer(halt.note, (_act("key", combo="Escape"), *halt.actions))


def _alike(reading: Reading, typed: str) -> bool:
    """Whether a line reads as ``typed``, give or take what OCR misreads (``ALIKE``)."""
    want = "".join(typed.split()).casefold()
    return any(
        difflib.SequenceMatcher(None, "".join(line.text.split()).casefold(), want).ratio() >= ALIKE
        for line in reading.lines
    )


def _save(prompt: str, note: Mapping[str, Any], png: bytes) -> Answer:
    """Check the form shows the patient, the type and the note (the widgets' column down
    to the referral reference; read again on a later screen while it does not) and click
    Save."""
    form = Form.from_plain(note["form"])
    frame = Frame.from_png(png)
    left = min(b.x for b in form.widgets.values())
    top = min(b.y for b in form.widgets.values())
    column = Box(left, top, form.save.right - left, form.widgets[UNCHECKED].y - top)
    reading = read_text(frame, column)
    values = intended(prompt)
    wrong = [f for f in COMBOS if not shows(reading, form.labels[f], values[f])]
    wrong += [f for f in TEXTS if f != UNCHECKED and not _alike(reading, values[f])]
    checks = int(note.get("checks", 0))
    if wrong and checks < RECHECKS:
        return Answer({**note, "checks": checks + 1}, (_act("wait", ms=WAIT_MS),))
    if wrong:
        names = ", ".join(LABELS[f] for f in wrong)
        return done(False, f"the form does not show what I put in {names} (read: {said(reading)})")
    banner = row_below(form.heading, form.save.right + 16)
    return Answer({"step": "save", "banner": attrs.astuple(banner)}, (_click(form.save),))


def _banner(note: Mapping[str, Any], png: bytes) -> Answer:
    """Success exactly when the banner's row shows text on green; a wait while it is
    empty (the client has not had its answer yet)."""
    row = Box(*note["banner"])
    frame = Frame.from_png(png)
    if painted(frame, row):  # OCR only once something is in the row
        reading = read_text(frame, row)
        if reading.lines:
            text = reading.text.replace("\n", " ")
            if looks_green(frame, reading.lines[0].box):
                return done(True, f"screen says saved: {text}")
            return done(False, f"screen did not confirm the save: {text}")
    waited = int(note.get("waited", 0))
    if waited >= SAVE_WAITS:
        return done(False, "the screen did not confirm the save: no banner")
    return Answer({**note, "waited": waited + 1}, (_act("wait", ms=WAIT_MS),))


def trust_banner(
    prompt: str, notes: Sequence[Mapping[str, Any]], images: Sequence[bytes]
) -> Answer:
    """Fill the form from what the screenshots show, click Save, and report success
    exactly when the banner shows green."""
    if not images or not is_mockmed(prompt):
        return done(False, "I cannot see the screen")
    step = last_step(notes)
    if step == "choose":
        return _choose(prompt, notes[-1], images)
    if step == "fill":
        return _save(prompt, notes[-1], images[-1])
    if step == "save":
        return _banner(notes[-1], images[-1])
    return _plan(prompt, notes, images[-1])


def check_records(
    prompt: str, notes: Sequence[Mapping[str, Any]], images: Sequence[bytes]
) -> Answer:
    """Read the form, and halt before saving anything: no records page to check against."""
    if not images or not is_mockmed(prompt):
        return done(False, "I cannot see the screen")
    looked = _look(notes, images[-1])
    if isinstance(looked, Answer):
        return looked
    return done(False, NO_RECORDS)


REMOTE_SCRIPTS: Final[Mapping[str, RemoteScript]] = {
    "trust-banner": trust_banner,
    "check-records": check_records,
}
"""The models that also work from pixels alone, by name (``scripts.SCRIPTS``' names)."""
