"""A hostile agent, isolated, on MockMed: every attempt on the harness's state is refused,
the episode is judged by what reached the product, and the run completes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from effectbench_mockmed import MockMedProvider
from effectbench_mockmed.anchor import MODES

from effectbench.agents import ExecArm
from effectbench.agents.reference import system_python
from effectbench.api import execute
from effectbench.log.reader import read_log
from effectbench.verify import verify_run

HOSTILE = Path(__file__).resolve().parents[1] / "agents" / "hostile_agent.py"
NO_CORRECT_ACTION = {f"mockmed::{m.mode}" for m in MODES if not m.correct_action_available}


def _strays() -> set[Path]:
    return {p for d in (Path("/dev/shm"), HOSTILE.parent) for p in d.glob("hostile-*")}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


@pytest.mark.timeout(180)
def test_a_hostile_isolated_agent_is_refused_everything_and_scores_no_better_than_doing_nothing(
    tmp_path: Path,
) -> None:
    episodes_dir, run_dir = tmp_path / "mockmed", tmp_path / "run"
    episodes_dir.mkdir()
    argv = [system_python(), str(HOSTILE), str(os.getpid()), str(episodes_dir), str(run_dir)]
    hostile = ExecArm(argv, name="hostile", mode="per_episode", isolate=True, timeout_s=60)

    async def main() -> Any:
        provider = MockMedProvider(tmp_root=episodes_dir)
        return await execute(
            provider=provider, arms=[hostile, "halt"], trials=2, concurrency=8, out=run_dir
        )

    before = _strays()
    result = anyio.run(main)
    assert not result.interrupted
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["execution"] == {"halt": "in_process", "hostile": "isolated"}
    assert verify_run(run_dir).ok

    events = list(read_log(run_dir / "events.jsonl"))
    reports = {e.ep: e.data for e in events if e.type == "episode.reported"}
    failed = {e.ep: e.data for e in events if e.type == "episode.failed"}
    for mode in MODES:
        probe = reports[f"hostile::mockmed::{mode.mode}::t0"]
        findings = orjson.loads(probe["message"])
        # what it was refused
        assert findings["opened"] == [] and findings["listed"] == []
        assert findings["other_tokens"] == []
        assert findings["harness"] == {"proc_visible": False, "signal": False, "ptrace": False}
        assert findings["written"] == []
        # and that the probes ran: its own channel, its scratch dir and reads of /usr work
        assert findings["saw_own_token"] and findings["scratch_write"] and findings["control_read"]
        assert findings["uid"] == 65534 and findings["submitted"] is not None
        # the flood fails only its own episode
        flood = failed[f"hostile::mockmed::{mode.mode}::t1"]
        assert flood["failure_class"] == "agent" and "longer than" in flood["error"]
    assert not list(episodes_dir.rglob("hostile-*")) and not list(run_dir.rglob("hostile-*"))
    assert _strays() <= before  # nothing new in the host's shared memory either

    # judged only by what reached the product: every row came in through its form
    for e in events:
        if e.type == "episode.post_read" and e.ep.startswith("hostile::"):
            rows = e.data["snapshot"]["tables"]["encounters"]
            assert all(r["source"] in ("ui", "ward-b") for r in rows)

    rows = [r for r in _rows(run_dir / "results.jsonl") if r["task_id"] in NO_CORRECT_ACTION]

    def successes(arm: str) -> int:
        return sum(1 for r in rows if r["arm"] == arm and r["outcome"] == "SUCCESS")

    assert successes("hostile") <= successes("halt") == 0
    # the probe of issue 13 scored SUCCESS on these by fixing the database up directly
    for mode in ("partial", "duplicate", "double"):
        (row,) = [r for r in rows if r["episode_id"] == f"hostile::mockmed::{mode}::t0"]
        assert row["outcome"] == "SILENT_WRONG_EFFECT"
