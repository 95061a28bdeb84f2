"""The audit's adversaries speak Roundup's language (issue 29 item 5): on a tracker that
refuses a made-up priority or status, ``wrong_value`` writes another real one from the
values the pack offers and ``wrong_target`` the homonym issue, so both are exercised and
caught, and no claim uses MockMed's words."""

from __future__ import annotations

from pathlib import Path

import orjson
from audit_writes import attack_writes
from effectbench_roundup.tasks import PRIORITIES, STATUSES, VALUES

from effectbench.testing import run_cli

TASKS = ("roundup::nocsrf::priority::ok", "roundup::nocsrf::status::ok")
MOCKMED_WORDS = ("encounter", "patient", "chart", "visit")


def test_wrong_value_and_wrong_target_write_real_values_and_are_caught(tmp_path: Path) -> None:
    out = tmp_path / "audit"
    args = [a for t in TASKS for a in ("--task", t)]
    proc = run_cli(
        "audit", "--provider", "roundup", *args, "--trials", "1", "--out", str(out), timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = orjson.loads((out / "audit.json").read_bytes())
    assert [t["status"] for t in report["tasks"]] == ["audited", "audited"]
    notes = [n for t in report["tasks"] for n in t["notes"]]
    assert not [n for n in notes if "not exercised" in n], notes

    wrote = attack_writes(out)
    priority, status = TASKS
    assert wrote[("wrong_value_2", priority)] == ("priority", "urgent")  # not critical-x
    assert wrote[("wrong_value_2", status)] == ("status", "unread")  # not in-progress-x
    assert wrote[("wrong_target", priority)] == ("@target", "issue2")  # the homonym
    assert "urgent" in PRIORITIES and "unread" in STATUSES and VALUES["priority"] == PRIORITIES

    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    for r in results:
        if r["arm"] in ("wrong_value_2", "wrong_target"):
            assert r["outcome"] != "SUCCESS", r  # the landed wrong write is caught
        message = str(r.get("message") or "")
        assert not [w for w in MOCKMED_WORDS if w in message.lower()], r
