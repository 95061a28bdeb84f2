"""The episode set and every non-timing field of results and metrics do not depend on
--concurrency (MockMed, both reference arms, the full anchor)."""

from __future__ import annotations

from pathlib import Path

import pytest
from anchor_log import GOLDEN, anchor_log

from effectbench.api import evaluate
from effectbench.testing import untimed_run


@pytest.mark.timeout(120)
def test_concurrency_1_and_256_give_identical_results(tmp_path: Path) -> None:
    runs = {
        c: evaluate(
            ["screen_only", "effect_verified"], trials=10, concurrency=c, out=tmp_path / f"c{c}"
        )
        for c in (1, 256)
    }
    (r1, m1), (r256, m256) = untimed_run(runs[1].run_dir), untimed_run(runs[256].run_dir)
    assert len(r1) == 180
    assert list(r1) == list(r256), "results.jsonl order depends on concurrency"
    for ep in r1:
        assert r1[ep] == r256[ep], ep
    assert m1 == m256
    for arm, swer in (("screen_only", 50), ("effect_verified", 0)):
        assert m1["arms"][arm]["swer"]["numerator"] == swer
        assert m1["arms"][arm]["over_halt"]["numerator"] == 0


@pytest.mark.timeout(120)
def test_the_anchor_log_is_byte_identical_to_the_golden_timing_aside(tmp_path: Path) -> None:
    """Every line the scheduler writes for one trial of both baselines on the anchor, minus
    ts, h, run_id and *_ms (tests/golden/anchor-events.jsonl, written by
    `.venv/bin/python tests/anchor_log.py`; regenerate only for an intended change)."""
    got = anchor_log(tmp_path / "run")
    want = GOLDEN.read_bytes()
    assert got.splitlines() == want.splitlines()
