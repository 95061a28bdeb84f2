"""What each of an audit's writing attacks wrote, read from the audit's log: the field and
value each per-field or wrong-target attack put in its submission, per (arm, task)."""

from __future__ import annotations

from pathlib import Path

from run_files import log_events


def attack_writes(run: Path) -> dict[tuple[str, str], tuple[str, object]]:
    """``(arm, task_id) -> (field, value)`` for every episode action that wrote a field."""
    wrote: dict[tuple[str, str], tuple[str, object]] = {}
    for e in log_events(run):
        detail = e["data"].get("detail") if e["type"] == "episode.action" else None
        if isinstance(detail, dict) and detail.get("wrote") and "field" in detail:
            arm, _, rest = str(e["ep"]).partition("::")
            wrote[(arm, rest.rpartition("::t")[0])] = (str(detail["field"]), detail["value"])
    return wrote
