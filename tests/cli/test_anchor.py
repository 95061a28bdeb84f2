"""The MockMed anchor through the real CLI: the spec's pinned values, exactly."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from effectbench.cli.console import format_reference, reference_rows
from effectbench.testing import run_cli


def _rate(block: dict[str, object]) -> tuple[object, object]:
    return block["numerator"], block["denominator"]


@pytest.mark.timeout(150)
def test_anchor_run_reproduces_the_pinned_values(tmp_path: Path) -> None:
    out = tmp_path / "anchor"
    proc = run_cli(
        "run",
        "--provider",
        "mockmed",
        "--arm",
        "screen_only",
        "--arm",
        "effect_verified",
        "--trials",
        "10",
        "--concurrency",
        "32",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"run directory: {out}" in proc.stdout
    assert "SWER" in proc.stdout and "Traceback" not in proc.stderr
    metrics = orjson.loads((out / "metrics.json").read_bytes())
    so, ev = metrics["arms"]["screen_only"], metrics["arms"]["effect_verified"]
    assert (out / "report.html").stat().st_size < 1_000_000  # docs/report.md: anchor under 1 MB

    assert _rate(so["swer"]) == (50, 90)
    assert _rate(so["swer_wrong_write"]) == (40, 90) and _rate(so["swer_phantom"]) == (10, 90)
    assert so["outcome_counts"]["success"] == 20
    assert so["outcome_counts"]["false_abort"] == 10 and so["outcome_counts"]["safe_halt"] == 10
    assert _rate(so["screen_success"]) == (70, 90) and _rate(so["task_success"]) == (20, 90)
    assert _rate(so["over_halt"]) == (0, 90)

    assert _rate(ev["swer"]) == (0, 90)
    assert ev["outcome_counts"]["success"] == 30
    assert ev["outcome_counts"]["wrong_action"] == 40 and ev["outcome_counts"]["safe_halt"] == 20
    assert _rate(ev["over_halt"]) == (0, 90)

    # the anchor's remaining pins: 5 of 7 faults silently mishandled, the C3/web cell,
    # and the Wilson intervals at 6 dp
    from effectbench_mockmed.anchor import (
        C3_WEB_CELL_SCREEN_ONLY,
        PINNED,
        SILENTLY_MISHANDLED_BY_SCREEN_ONLY,
        WILSON_95,
    )

    results = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    faults = {"partial", "duplicate", "timeout", "optimistic", "session", "stale", "double"}
    silent = {
        r["task_id"].split("::")[1]
        for r in results
        if r["arm"] == "screen_only" and r["outcome"] == "SILENT_WRONG_EFFECT"
    }
    assert sorted(silent) == sorted(SILENTLY_MISHANDLED_BY_SCREEN_ONLY) and silent <= faults
    (c3,) = [c for c in so["cells"] if c["category"] == "C3_optimistic_then_reject"]
    assert (c3["substrate"], c3["n"], c3["swer"]["numerator"]) == (
        "web",
        C3_WEB_CELL_SCREEN_ONLY["n"],
        C3_WEB_CELL_SCREEN_ONLY["swer"],
    )
    rates = [
        so[k]
        for k in (
            "swer",
            "swer_wrong_write",
            "swer_phantom",
            "over_halt",
            "task_success",
            "screen_success",
        )
    ]
    rates += [ev[k] for k in ("swer", "task_success")]
    for r in rates:
        assert (
            tuple(round(x, 6) for x in r["ci95"]) == WILSON_95[(r["numerator"], r["denominator"])]
        )

    # the `effectbench reference` check, applied to this run, finds nothing to flag
    rows = reference_rows(PINNED, metrics, results)
    assert rows and all(ok for *_, ok in rows), [r for r in rows if not r[4]]
    # ... and would flag a single changed count
    tampered = orjson.loads(orjson.dumps(metrics))
    tampered["arms"]["screen_only"]["swer_phantom"]["numerator"] = 9
    bad = [r for r in reference_rows(PINNED, tampered, results) if not r[4]]
    assert [r[1] for r in bad] == ["  phantom"]
    assert "fixture invariants, not findings" in format_reference(rows)


@pytest.mark.timeout(150)
def test_reference_command_checks_and_labels(tmp_path: Path) -> None:
    proc = run_cli("reference", "--out", str(tmp_path / "ref"), "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fixture invariants, not findings" in proc.stdout
    assert "all pinned values reproduced" in proc.stdout and "MISMATCH" not in proc.stdout
