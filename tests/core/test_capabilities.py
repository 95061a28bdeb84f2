"""A plugin's optional members are a declared, checked contract (issue 26 item 1).

Each test hands the harness a plugin that gets a capability wrong the way a third party
would (a misspelt flag, a hook with the wrong signature, a truthy non-bool) and checks
the harness says so when the plugin loads, before any run directory exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from effectbench.api import RunError, evaluate_provider
from effectbench.arm import Arm
from effectbench.core.capabilities import (
    ARM_CAPABILITIES,
    PROVIDER_CAPABILITIES,
    ArmCapabilities,
    ProviderCapabilities,
    capability_hints,
    capability_problems,
)
from effectbench.model import AgentReport
from effectbench.run.registry import PluginError, PluginWarning, instantiate
from effectbench.testing import InMemoryProvider


class _Base:
    name = "cap-probe"

    async def run(self, task: object, env: object) -> AgentReport:
        return AgentReport(reported_success=False, halted=True, message="")


class Misspelt(_Base):
    uses_browsr = True


class UnknownUses(_Base):
    uses_keyboard = True


class LifespanNoArg(_Base):
    def lifespan(self) -> object:  # the harness passes the run directory
        raise AssertionError("never called")


class PreflightWithArg(_Base):
    def preflight(self, options: Mapping[str, str]) -> None:  # an arm's takes none
        raise AssertionError("never called")


class TruthyFlag(_Base):
    uses_browser = 1


class Fine(_Base):
    uses_model = True
    records_actions = True
    version = "probe==1"
    helper_setting = 3  # a member of its own, not close to a capability

    def preflight(self) -> None:
        return None


def test_a_misspelt_capability_warns_with_the_name_it_resembles() -> None:
    with pytest.warns(
        PluginWarning, match=r"'uses_browsr' is no arm capability; did you mean 'uses_browser'"
    ):
        instantiate(Misspelt, Arm, "arm 'cap-probe'")


def test_an_unknown_uses_flag_warns_listing_the_known_ones() -> None:
    assert capability_hints(UnknownUses(), "arm") == [
        (
            "'uses_keyboard' is no arm capability (the harness knows uses_model, uses_browser, "
            "uses_browser_cdp)"
        )
    ]


def test_a_plugin_member_of_its_own_is_not_warned_about() -> None:
    assert capability_hints(Fine(), "arm") == []
    assert capability_problems(Fine(), "arm") == []


@pytest.mark.parametrize(
    ("klass", "says"),
    [
        (LifespanNoArg, "'lifespan' is called with 1 argument but takes 0"),
        (PreflightWithArg, "'preflight' is called with 0 arguments but takes 1"),
        (TruthyFlag, "'uses_browser' must be True or False, got 1"),
    ],
)
def test_a_hook_the_harness_cannot_call_is_refused_at_load(klass: type, says: str) -> None:
    with pytest.raises(PluginError) as caught:
        instantiate(klass, Arm, "arm 'cap-probe'")
    assert says in str(caught.value)
    assert "cannot use" in caught.value.reason


class SyncPreflightProvider(InMemoryProvider):
    def preflight(self, options: Mapping[str, str]) -> None:  # must be async
        return None


class BadRecommendation(InMemoryProvider):
    recommended_concurrency = 0


def test_a_provider_sync_preflight_and_a_bad_recommendation_are_refused() -> None:
    assert capability_problems(SyncPreflightProvider(), "provider") == [
        "'preflight' must be an async method (async def preflight(self, options))"
    ]
    assert capability_problems(BadRecommendation(), "provider") == [
        "'recommended_concurrency' must be an int >= 1, got 0"
    ]


def test_an_arm_object_with_a_broken_hook_is_refused_before_the_run_dir(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    with pytest.raises(RunError, match="'lifespan' is called with 1 argument but takes 0"):
        evaluate_provider(LifespanNoArg(), InMemoryProvider(), trials=1, out=out)
    assert not out.exists()


def test_the_record_holds_declared_members_and_defaults_the_rest() -> None:
    caps = ArmCapabilities.of(Fine())
    assert (caps.uses_model, caps.records_actions, caps.version) == (True, True, "probe==1")
    assert (caps.uses_browser, caps.lifespan, caps.execution) == (False, None, "in_process")
    assert caps.preflight is not None and not caps.holds_harness_resource
    assert ProviderCapabilities.of(InMemoryProvider()) == ProviderCapabilities()


class _Unavailable(_Base):
    @property
    def execution(self) -> str:
        raise RuntimeError("bubblewrap is not installed")


def test_a_computed_execution_that_raises_is_held_not_raised() -> None:
    caps = ArmCapabilities.of(_Unavailable())
    assert (caps.execution, caps.execution_error) == ("unavailable", "bubblewrap is not installed")


def test_the_declared_names_match_the_records_fields() -> None:
    arm_fields = {a.name for a in ArmCapabilities.__attrs_attrs__}
    assert arm_fields - set(ARM_CAPABILITIES) == {"execution_error"}
    assert set(PROVIDER_CAPABILITIES) == {a.name for a in ProviderCapabilities.__attrs_attrs__}


class _Uncontainable(_Base):
    """Claims to be containable, then cannot say how it runs: the sandbox is missing."""

    def with_isolation(self, isolate: bool | None) -> _Uncontainable:
        return self

    @property
    def execution(self) -> str:
        raise RuntimeError("bubblewrap (bwrap) is not installed")


def test_an_arm_that_cannot_be_contained_is_refused_under_isolate(tmp_path: Path) -> None:
    """The contained seal may not be earned by an arm whose containment fails to start:
    --isolate refuses the run before anything is written."""
    out = tmp_path / "run"
    with pytest.raises(RunError, match="bubblewrap .*; install bubblewrap, or run without"):
        evaluate_provider(_Uncontainable(), InMemoryProvider(), trials=1, out=out, isolate=True)
    assert not out.exists()
