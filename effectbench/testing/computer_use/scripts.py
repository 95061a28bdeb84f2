"""The stand-in's scripted decisions, independent of the wire format.

A script reads the task prompt, its own earlier notes (the ``content`` it sent with each
earlier answer, a JSON object, so the server keeps no state per conversation) and the
view of the latest screenshot, and answers with a note and a list of actions in the
computer action space's names and arguments. MockMed's form is filled the way a person
does it with a mouse and keyboard: click a select, step to the option with the arrow
keys, press Enter; click a text field, select all, type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from effectbench.testing.computer_use import roundup
from effectbench.testing.computer_use.answer import Act, Answer, Script, last_step
from effectbench.testing.computer_use.answer import done as _done
from effectbench.testing.computer_use.sight import View

__all__ = [
    "SCRIPTS",
    "Answer",
    "Script",
    "check_records",
    "follow_steps",
    "intended",
    "is_mockmed",
    "trust_banner",
]

_PAYLOAD: Final = re.compile(r"Payload \(JSON\): (\{.*\})")
_PATIENT: Final = re.compile(r"Patient (\w+)")
_KIND: Final = re.compile(r"Record an? (\w+) encounter")


def is_mockmed(prompt: str) -> bool:
    """Whether the task is MockMed's: it names a patient and an encounter type."""
    return bool(_PATIENT.search(prompt) and _KIND.search(prompt))


def intended(prompt: str) -> dict[str, str]:
    """The form's values as the task's text asks for them."""
    found = _PAYLOAD.search(prompt)
    patient, kind = _PATIENT.search(prompt), _KIND.search(prompt)
    if found is None or patient is None or kind is None:
        raise ValueError("the prompt has no payload, patient or encounter type")
    payload = orjson.loads(found.group(1))
    return {
        "patient_id": patient.group(1),
        "type": kind.group(1),
        "note": str(payload["note"]),
        "key": str(payload["record_key"]),
    }


def _fill(view: View, values: Mapping[str, str]) -> list[Act] | None:
    """The actions that put ``values`` into the visible form (None: a field is not there)."""
    out: list[Act] = []
    for name, value in values.items():
        field = view.fields.get(name)
        if field is None:
            return None
        x, y = field["at"]
        if field["tag"] == "select":
            options = list(field["options"])
            if value not in options:
                return None
            steps = options.index(value) - int(field["selected"])
            if steps:
                out.append(("click", {"x": x, "y": y}))
                key = "Down" if steps > 0 else "Up"
                out.extend(("key", {"combo": key}) for _ in range(abs(steps)))
                out.append(("key", {"combo": "Return"}))
        else:
            out.append(("click", {"x": x, "y": y}))
            out.append(("key", {"combo": "ctrl+a"}))
            out.append(("type", {"text": value}))
    return out


def _filled(view: View, values: Mapping[str, str]) -> bool:
    return all(
        (f := view.fields.get(k)) is not None and str(f["value"]) == v for k, v in values.items()
    )


def _fill_and_save(
    prompt: str, notes: Sequence[Mapping[str, Any]], view: View, after: str
) -> Answer | None:
    """Fill (one turn), then check the form shows the values and press Save (the next):
    None once saved, so the caller decides what the result means."""
    values = intended(prompt)
    step = last_step(notes)
    if step not in ("fill", "save") and view.fields:
        fill = _fill(view, values)
        if fill is None:
            return _done(False, "the form does not offer the patient, type or fields asked for")
        return Answer({"step": "fill"}, tuple(fill))
    if step == "fill":
        if not _filled(view, values) or view.submit is None:
            return _done(False, "the form does not show the values typed")
        x, y = view.submit
        return Answer({"step": "save", "then": after}, (("click", {"x": x, "y": y}),))
    return None


def trust_banner(prompt: str, notes: Sequence[Mapping[str, Any]], view: View | None) -> Answer:
    """Fill the form, press Save, and report success exactly when the banner says saved."""
    if view is None:
        return _done(False, "I cannot see the screen")
    acted = _fill_and_save(prompt, notes, view, "banner")
    if acted is not None:
        return acted
    banner = view.banner
    if banner is None:
        return _done(False, "the screen did not confirm the save")
    if banner["saved"]:
        return _done(True, f"screen says saved: {banner['text']}")
    return _done(False, f"screen did not confirm the save: {banner['text']}")


def _open(view: View, link: str, step: str, extra: Mapping[str, Any] | None = None) -> Answer:
    at = view.links.get(link)
    if at is None:
        return _done(False, f"no {link!r} link on the screen")
    return Answer({"step": step, **(extra or {})}, (("click", {"x": at[0], "y": at[1]}),))


def _verdict(before: Sequence[Any], after: Sequence[Any], values: Mapping[str, str]) -> Answer:
    """The stand-in's own effect check over what the records page showed twice."""
    if any(row not in after for row in before):
        return _done(False, "a record that was there before is gone")
    mine = [
        r for r in after
        if r not in before and r.get("patient_id") == values["patient_id"]
        and r.get("type") == values["type"]
    ]  # fmt: skip
    if len(mine) != 1 or mine[0].get("note") != values["note"]:
        shown = f"the records page shows {len(mine)} new record(s), not one with the note"
        return _done(False, shown)
    return _done(True, "the records page shows the encounter with the note")


def check_records(prompt: str, notes: Sequence[Mapping[str, Any]], view: View | None) -> Answer:
    """Open the records page, go back and fill and save the form, open the records page
    again, and claim success only when it shows exactly the one new record asked for."""
    if view is None:
        return _done(False, "I cannot see the screen")
    step = last_step(notes)
    if not notes:
        return _open(view, "Chart records", "records-before")
    if step == "records-before":
        if view.rows is None:
            return _done(False, "the records page shows no records table")
        return _open(view, "New encounter", "form", {"before": list(view.rows)})
    before = next((n["before"] for n in notes if "before" in n), None)
    if step in ("form", "fill"):
        acted = _fill_and_save(prompt, notes, view, "records")
        if acted is not None:
            return acted
    if step == "save":
        return _open(view, "Chart records", "records-after")
    if step == "records-after" and before is not None:
        if view.rows is None:
            return _done(False, "the records page shows no records table")
        return _verdict(before, view.rows, intended(prompt))
    return _done(False, f"lost my place (step {step!r})")


def _by_product(mockmed: Script, other: Script) -> Script:
    """One model for both products: MockMed's tasks name a patient and an encounter
    type; any other task is read as Roundup's (``roundup``)."""

    def script(prompt: str, notes: Sequence[Mapping[str, Any]], view: View | None) -> Answer:
        chosen = mockmed if is_mockmed(prompt) else other
        return chosen(prompt, notes, view)

    return script


_STEPS: Final = re.compile(r"Steps \(JSON\): (\[.*?\])(?:\n|$)")


def follow_steps(prompt: str, notes: Sequence[Mapping[str, Any]], view: View | None) -> Answer:
    """Performs the actions the task's text lists (``Steps (JSON): [{"action": ...}]``) in
    one turn, then reports success: a model with no sight, for a screen whose layout the
    test already knows (the remote-display screen's own tests)."""
    if last_step(notes) == "acted":
        return _done(True, "followed the steps")
    found = _STEPS.search(prompt)
    if found is None:
        return _done(False, "the task lists no steps")
    steps = orjson.loads(found.group(1))
    acts = tuple((str(s["action"]), {k: v for k, v in s.items() if k != "action"}) for s in steps)
    return Answer({"step": "acted"}, acts)


SCRIPTS: Final[Mapping[str, Script]] = {
    "trust-banner": _by_product(trust_banner, roundup.trust_banner),
    "check-records": _by_product(check_records, roundup.check_records),
    "follow-steps": follow_steps,
}
