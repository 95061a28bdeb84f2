"""The audit's adversaries speak the ledger's language: on forms that offer only real
participants and bill types, ``wrong_value`` writes another real payer, another real
split or a scaled amount (the money bug the other way), ``wrong_target`` the homonym
bill, and every one that lands is caught by the oracle over the ledger's database."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from audit_writes import attack_writes

from effectbench.testing import run_cli

TASKS = ("ihatemoney::expense::ok", "ihatemoney::amount::ok")
pytestmark = pytest.mark.timeout(900)


def test_wrong_values_are_real_ones_and_every_landed_wrong_write_is_caught(tmp_path: Path) -> None:
    out = tmp_path / "audit"
    args = [a for t in TASKS for a in ("--task", t)]
    proc = run_cli(
        "audit", "--provider", "ihatemoney", *args, "--trials", "1", "--concurrency", "4",
        "--provider-timeout", "300", "--out", str(out), timeout=880,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = orjson.loads((out / "audit.json").read_bytes())
    assert [t["status"] for t in report["tasks"]] == ["audited", "audited"]

    wrote = attack_writes(out)
    expense, amount = TASKS
    written = {v for (arm, task), v in wrote.items() if task == expense}
    assert ("payer", "bob") in written  # a real participant, not "alice-x"
    assert ("payed_for", "alice,bob") in written  # a real split
    assert ("amount", 4250.0) in written  # 42.50 scaled by 100
    assert wrote[("wrong_target", amount)] == ("@target", "edit/5")  # the homonym bill
    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    for r in results:
        if r["arm"].startswith("wrong_") or r["arm"] in ("cross_trial", "extra_change"):
            assert r["outcome"] != "SUCCESS", r
