"""The public pack manifest seals the test split; runs still score it.

A leak is searched for by content, not by key name: each sealed task's goal text and
effect hash must appear nowhere in the serialized manifest (public or run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from effectbench_mockmed.packs_full import FULL_TASKS, MockMedFullProvider
from effectbench_mockmed.provider import MockMedProvider
from hypothesis import given
from hypothesis import strategies as st

from effectbench.audit.pack import SEALED_KEYS, public_pack_manifest, redact_task_entry
from effectbench.core.hashing import content_hash
from effectbench.core.model import Split, TaskSpec
from effectbench.run.plan import pack_fingerprint
from effectbench.testing import run_cli

SEALED = [t for t in FULL_TASKS if t.split is Split.TEST]
PUBLIC = [t for t in FULL_TASKS if t.split is Split.DEV]


def _secrets(t: TaskSpec) -> list[str]:
    """What a sealed task must never publish: its goal and its effect hash."""
    return [t.goal, content_hash(t.expected_effect)]


def test_public_manifest_seals_the_test_split() -> None:
    manifest = public_pack_manifest(MockMedFullProvider())
    blob = orjson.dumps(manifest).decode()
    assert SEALED, "the full pack must have a test split for this test to mean anything"
    for t in SEALED:
        for secret in _secrets(t):
            assert secret not in blob
    entries = {e["task_id"]: e for e in manifest["tasks"]}
    assert set(entries) == {t.task_id for t in FULL_TASKS}
    for t in SEALED:
        assert set(entries[t.task_id]) == {*SEALED_KEYS, "sealed"}
        assert entries[t.task_id]["sealed"] is True
    for t in PUBLIC:
        e = entries[t.task_id]
        assert e["goal"] == t.goal
        assert e["effect_hash"] == content_hash(t.expected_effect)
        assert e["oracle"]["channel"] == t.oracle.channel
        assert e["correct_action_available"] is t.correct_action_available
    assert manifest["fingerprint"] == pack_fingerprint(FULL_TASKS)
    assert manifest["counts"] == {"tasks": len(FULL_TASKS), "sealed": len(SEALED)}
    assert (manifest["name"], manifest["version"]) == ("mockmed-full", MockMedFullProvider.version)


def test_positive_control_the_search_finds_public_secrets() -> None:
    """The same search does find a dev task's goal and hash, so a leak would be seen."""
    blob = orjson.dumps(public_pack_manifest(MockMedFullProvider())).decode()
    for t in PUBLIC:
        for secret in _secrets(t):
            assert secret in blob


def test_anchor_pack_has_no_sealed_task() -> None:
    manifest = public_pack_manifest(MockMedProvider())
    assert manifest["counts"]["sealed"] == 0 and len(manifest["tasks"]) == 9


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20))


@given(
    entry=st.dictionaries(st.text(max_size=12), _scalars, max_size=12),
    split=st.sampled_from(["test", "dev", None]),
)
def test_redaction_keeps_only_the_axes_of_a_test_task(
    entry: dict[str, Any], split: str | None
) -> None:
    if split is not None:
        entry = {**entry, "split": split}
    out = redact_task_entry(entry)
    if entry.get("split") == "test":
        assert set(out) <= {*SEALED_KEYS, "sealed"} and out["sealed"] is True
        assert all(out[k] == entry[k] for k in SEALED_KEYS if k in entry)
    else:
        assert out == entry


def test_cli_pack_prints_the_public_manifest() -> None:
    proc = run_cli("pack", "--provider", "mockmed-full")
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout) == orjson.loads(
        orjson.dumps(public_pack_manifest(MockMedFullProvider()))
    )
    bad = run_cli("pack", "--provider", "no-such-pack")
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "no-such-pack" in bad.stderr


def test_a_run_scores_sealed_tasks_but_its_manifest_does_not_reveal_them(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli(
        "run",
        "--provider",
        "mockmed-full",
        "--arm",
        "screen_only",
        "--task",
        "mockmed::sealed-*",
        "--task",
        "mockmed::ok",
        "--trials",
        "2",
        "--out",
        str(out),
        "-q",
        env={**os.environ, "EFFECTBENCH_STATE_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    rows = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    sealed_rows = [r for r in rows if r["split"] == "test"]
    assert len(sealed_rows) == 2 * len(SEALED)
    assert all(r["eligible"] and r["outcome"] for r in sealed_rows)
    assert {r["task_id"]: r["outcome"] for r in sealed_rows} == {
        "mockmed::sealed-1": "SUCCESS",
        "mockmed::sealed-2": "SILENT_WRONG_EFFECT",
        "mockmed::sealed-3": "SILENT_WRONG_EFFECT",
    }
    manifest_blob = (out / "manifest.json").read_text()
    for t in SEALED:
        for secret in _secrets(t):
            assert secret not in manifest_blob
    manifest = orjson.loads(manifest_blob)
    ok = next(e for e in manifest["tasks"] if e["task_id"] == "mockmed::ok")
    assert ok["effect_hash"] == content_hash(FULL_TASKS[0].expected_effect)
    # the log keeps what scoring needs: the sealed goal is in the plan it records
    assert SEALED[0].goal in (out / "events.jsonl").read_text()
    assert run_cli("verify", str(out)).returncode == 0


# --- adversarially_audited comes from audit evidence, never from the provider's flag ----------


class _ClaimsAudited(MockMedProvider):
    """The anchor pack, but every task's OracleSpec *says* it was audited."""

    def tasks(self) -> list[TaskSpec]:
        import attrs

        return [
            attrs.evolve(t, oracle=attrs.evolve(t.oracle, adversarially_audited=True))
            for t in super().tasks()
        ]


def test_a_hand_set_audited_flag_is_not_published() -> None:
    manifest = public_pack_manifest(_ClaimsAudited())
    assert manifest["audit"] is None
    assert [e["oracle"]["adversarially_audited"] for e in manifest["tasks"]] == [None] * 9


def test_audit_evidence_attests_its_own_pack_only(tmp_path: Path) -> None:
    import anyio
    import pytest

    from effectbench.audit.checks import audit_log
    from effectbench.audit.pack import PackError
    from effectbench.audit.runner import audit_provider

    report = anyio.run(
        lambda: audit_provider(
            MockMedProvider(), out_dir=tmp_path / "audit", trials=1, concurrency=16
        )
    )
    rederived = audit_log(tmp_path / "audit" / "events.jsonl")
    manifest = public_pack_manifest(MockMedProvider(), audit=rederived)
    assert [e["oracle"]["adversarially_audited"] for e in manifest["tasks"]] == [True] * 9
    assert manifest["audit"]["log_final_hash"] == report.final_hash != ""
    assert manifest["audit"]["audited"] == 9
    with pytest.raises(PackError, match="not of mockmed-full's pack"):
        public_pack_manifest(MockMedFullProvider(), audit=rederived)
    proc = run_cli(
        "pack", "--provider", "mockmed-full", "--audit-evidence", str(tmp_path / "audit")
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
