"""The stand-in's scripts on Roundup's classic pages (providers/roundup).

The task's text says which issue and which fields (``intent``); the screen says where
everything is. An issue is opened the way a person does it from any page: click the
sidebar's "Show issue:" box, type the number, press Enter; a new one with the first
"Create New" link (the Issues section's, above the Keywords one). Selects are stepped to
the option whose label the task names with the arrow keys, text fields are clicked,
selected and typed, and the form's own submit button is pressed.

``trust_banner`` then reports success exactly when the page shows Roundup's ok message
and no error. ``check_records`` instead opens what was saved and judges it: the edited
issue's page (by its number again), or, for a new issue, the issue list ("Show All"),
which must show exactly one issue with the title, then that issue's page. The page must
show every field the task set and the note exactly once among its messages; anything
else is a halt. A page without the sidebar (a gateway's error page) leaves it no way to
check, so it halts there too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
import orjson

from effectbench.testing.computer_use.answer import Act, Answer, done, last_step
from effectbench.testing.computer_use.sight import View

__all__ = ["Intent", "check_records", "intent", "trust_banner"]

_PAYLOAD: Final = "\nPayload (JSON): "
_NEW: Final = re.compile(
    r"Open a new issue titled with the title in your payload.*?priority ([\w-]+)"
)
_SUPERSEDE: Final = re.compile(
    r"Close issue(\d+) as a duplicate: mark it superseded by issue(\d+), "
    r"set its status to ([\w-]+)"
)
_STATUS: Final = re.compile(r"Set issue(\d+)'s status to ([\w-]+)")
_PRIORITY: Final = re.compile(r"Raise issue(\d+)'s priority to ([\w-]+)")
_ASSIGN: Final = re.compile(r"Assign issue(\d+) to ([\w-]+)")
_NOTE_TO: Final = re.compile(
    r"dd the note in your payload \(param 'note'\) to issue(\d+)( and resolve it)?"
)
NOTE: Final = "@note"
SHOW: Final = "@number"
"""The sidebar's "Show issue:" box."""
SAVE: Final = {True: "Submit New Entry", False: "Submit Changes"}
"""The item form's submit button, for a new issue and for an edit."""


@attrs.frozen
class Intent:
    """What the task asks: the issue (None: a new one) and what its form must show
    (field name -> an option's label or a text)."""

    issue: str | None
    values: Mapping[str, str]


def intent(prompt: str) -> Intent | None:
    """The task's text read as one of the pack's jobs; None when it names no issue."""
    goal, _, payload = prompt.partition(_PAYLOAD)
    params = orjson.loads(payload.splitlines()[0]) if payload else {}
    note = params.get("note")
    if not isinstance(note, str):
        return None
    if m := _NEW.search(goal):
        return Intent(None, {"title": str(params.get("title", "")), "priority": m[1], NOTE: note})
    if m := _SUPERSEDE.search(goal):
        return Intent(m[1], {"superseder": m[2], "status": m[3], NOTE: note})
    for pattern, field in ((_STATUS, "status"), (_PRIORITY, "priority"), (_ASSIGN, "assignedto")):
        if m := pattern.search(goal):
            return Intent(m[1], {field: m[2], NOTE: note})
    if m := _NOTE_TO.search(goal):
        return Intent(m[1], {NOTE: note, **({"status": "resolved"} if m[2] else {})})
    return None


def _shown(field: Mapping[str, Any]) -> str:
    """What a field shows: a select's chosen label, else its text."""
    if field["tag"] == "select":
        return str(field["labels"][int(field["selected"])])
    return str(field["value"])


def _fill(view: View, values: Mapping[str, str]) -> list[Act] | str:
    """The actions that put ``values`` into the visible form, or why they cannot."""
    out: list[Act] = []
    for name, value in values.items():
        field = view.fields.get(name)
        if field is None:
            return f"the form has no {name!r} field"
        x, y = field["at"]
        if field["tag"] == "select":
            labels = list(field["labels"])
            if value not in labels:
                return f"{name!r} offers no {value!r}"
            steps = labels.index(value) - int(field["selected"])
            if steps:
                out.append(("click", {"x": x, "y": y}))
                key = "Down" if steps > 0 else "Up"
                out.extend(("key", {"combo": key}) for _ in range(abs(steps)))
                out.append(("key", {"combo": "Return"}))
        else:
            out += [("click", {"x": x, "y": y}), ("key", {"combo": "ctrl+a"})]
            out.append(("type", {"text": value}))
    return out


def _show(view: View, issue: str, step: str) -> Answer:
    """Open issue ``issue`` with the sidebar's "Show issue:" box."""
    box = view.fields.get(SHOW)
    if box is None:
        return done(False, f"no way to open issue{issue} from this screen ({view.heading!r})")
    x, y = box["at"]
    acts: tuple[Act, ...] = (
        ("click", {"x": x, "y": y}),
        ("type", {"text": issue}),
        ("key", {"combo": "Return"}),
    )
    return Answer({"step": step, "issue": issue}, acts)


def _click(at: tuple[int, int], note: Mapping[str, Any]) -> Answer:
    return Answer(note, (("click", {"x": at[0], "y": at[1]}),))


def _begin(task: Intent | None, view: View) -> Answer:
    if task is None:
        return done(False, "the task names no issue I can tell apart: nothing done")
    if task.issue is not None:
        return _show(view, task.issue, "open")
    new = next((at for text, at in view.anchors if text == "Create New"), None)
    if new is None:
        return done(False, "no 'Create New' link on the screen")
    return _click(new, {"step": "open"})


def _on_form(task: Intent, view: View) -> str | None:
    """Why the screen is not the form the task needs, or None."""
    heading = view.heading or ""
    wanted = "New Issue" if task.issue is None else f"Issue{task.issue} "
    if not heading.startswith(wanted) or NOTE not in view.fields:
        return f"the screen shows {heading!r}, not the form of {wanted.strip().lower()}"
    return None


def _fill_and_save(task: Intent, step: str, view: View) -> Answer | None:
    """Fill the form (one turn), check it shows the values and press its submit button
    (the next); None once saved, so the caller decides what the result means."""
    if step == "open":
        wrong = _on_form(task, view)
        if wrong is not None:
            return done(False, wrong)
        fill = _fill(view, task.values)
        if isinstance(fill, str):
            return done(False, fill)
        return Answer({"step": "fill"}, tuple(fill))
    if step == "fill":
        shown = {k: _shown(f) for k in task.values if (f := view.fields.get(k)) is not None}
        button = view.buttons.get(SAVE[task.issue is None])
        if shown != dict(task.values) or button is None:
            return done(False, "the form does not show the values typed")
        return _click(button, {"step": "save"})
    return None


def trust_banner(prompt: str, notes: Sequence[Mapping[str, Any]], view: View | None) -> Answer:
    """Fill the form, save, and report success exactly when Roundup's ok message shows."""
    if view is None:
        return done(False, "I cannot see the screen")
    task, step = intent(prompt), last_step(notes)
    if not notes or task is None:
        return _begin(task, view)
    acted = _fill_and_save(task, step, view)
    if acted is not None:
        return acted
    banner = view.banner
    if step == "save" and banner is not None and banner["saved"]:
        return done(True, f"screen says saved: {banner['text']}")
    shown = banner["text"] if banner is not None else view.heading
    return done(False, f"screen did not confirm the save: {shown}")


def _find_new(task: Intent, view: View) -> Answer:
    """On the issue list: the one issue with the task's title, opened."""
    title = task.values["title"]
    mine = [r for r in view.listing or () if title in r.cells]
    if len(mine) != 1:
        return done(False, f"the issue list shows {len(mine)} issues titled {title!r}, not one")
    issue = mine[0].cells[0]
    return _click(mine[0].at, {"step": "check", "issue": issue})


def _verdict(task: Intent, issue: str, view: View) -> Answer:
    """The stand-in's own effect check on the saved issue's page."""
    heading = view.heading or ""
    if not heading.startswith(f"Issue{issue} "):
        return done(False, f"the screen shows {heading!r}, not issue{issue}")
    for name, want in task.values.items():
        if name == NOTE:
            continue
        field = view.fields.get(name)
        if field is None or _shown(field) != want:
            got = None if field is None else _shown(field)
            return done(False, f"issue{issue} shows {name} {got!r}, not {want!r}")
    count = list(view.messages or ()).count(task.values[NOTE])
    if count != 1:
        return done(False, f"issue{issue} shows the note {count} times, not once")
    return done(True, f"issue{issue}'s page shows what was asked, with the note")


def check_records(prompt: str, notes: Sequence[Mapping[str, Any]], view: View | None) -> Answer:
    """Fill and save the form, then open what was saved and claim success only when its
    page shows every field asked for and the note once."""
    if view is None:
        return done(False, "I cannot see the screen")
    task, step = intent(prompt), last_step(notes)
    if not notes or task is None:
        return _begin(task, view)
    acted = _fill_and_save(task, step, view)
    if acted is not None:
        return acted
    if step == "save":
        if task.issue is not None:
            return _show(view, task.issue, "check")
        listing = next((at for text, at in view.anchors if text == "Show All"), None)
        if listing is None:
            return done(False, f"no way to the issue list from this screen ({view.heading!r})")
        return _click(listing, {"step": "list"})
    if step == "list":
        return _find_new(task, view)
    if step == "check":
        return _verdict(task, str(notes[-1]["issue"]), view)
    return done(False, f"lost my place (step {step!r})")
