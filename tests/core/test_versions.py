"""Versions live in one leaf module, and the plan reads them from there at call time."""

from __future__ import annotations

import pytest

from effectbench.core import versions
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.testing import InMemoryProvider


def _plan_hash_and_versions() -> tuple[str, dict[str, str]]:
    plan = build_plan(ProviderInfo("fake", "1.0"), InMemoryProvider(("ok",)).tasks(), ["a"], 2)
    return plan.plan_hash, dict(plan.to_json()["versions"])


def test_a_scoring_bump_changes_the_plan_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    before, recorded = _plan_hash_and_versions()
    assert recorded["scoring"] == versions.SCORING_VERSION
    monkeypatch.setattr(versions, "SCORING_VERSION", "2.0.0")
    after, bumped = _plan_hash_and_versions()
    assert bumped["scoring"] == "2.0.0" and bumped["spec"] == versions.SPEC_VERSION
    assert after != before


def test_the_package_version_is_the_one_the_cli_prints() -> None:
    import effectbench

    assert effectbench.__version__ == versions.PACKAGE_VERSION
