"""effectbench.testing.ProviderContract: it passes a sound provider and each of its checks
fails, with a message saying what to fix, on a provider broken in the one way it checks.

The broken providers are the in-memory product with one flaw each (a shared store, an
oracle that is the arm's own readback, a frozen or counting oracle, a process or a port
left behind, repeated task ids, a bad capability, a task whose correct action cannot
land). The contract's methods are called directly, as pytest would, and an
AssertionError is a failed check.
"""

from __future__ import annotations

import inspect
import socket
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import pytest

from effectbench.core.model import Snapshot, TaskSpec
from effectbench.core.provider import BenchmarkProvider, ProvisionedEpisode
from effectbench.testing import InMemoryProvider, MemoryForm, ProviderContract, memory_task

SOUND_FORM = MemoryForm(readback=True)
CHECKS = sorted(n for n in vars(ProviderContract) if n.startswith("test_"))
REFERENCE_RUN = "test_the_reference_arm_succeeds_where_a_correct_action_exists"


class SharedEnvironment(InMemoryProvider):
    """Every episode of a task gets the first episode's store."""

    def __init__(self) -> None:
        super().__init__(form=SOUND_FORM)
        self.first: dict[str, ProvisionedEpisode] = {}

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        if task.task_id not in self.first:
            self.first[task.task_id] = await super().provision(task, trial, params)
        return self.first[task.task_id]


class ReadbackOracle(InMemoryProvider):
    """The oracle is the product's own readback, which the arm holds."""

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        ep = await super().provision(task, trial, params)
        assert ep.env.verifier is not None
        return attrs.evolve(ep, oracle=ep.env.verifier)


class _Fixed:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    async def read(self) -> Snapshot:
        return self.snapshot


class FrozenOracle(InMemoryProvider):
    """The oracle returns the record as it was at provision."""

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        ep = await super().provision(task, trial, params)
        return attrs.evolve(ep, oracle=_Fixed(await ep.oracle.read()))


class _Counting:
    def __init__(self, inner: ProvisionedEpisode) -> None:
        self.inner, self.reads = inner, 0

    async def read(self) -> Snapshot:
        self.reads += 1
        snap = await self.inner.oracle.read()
        return Snapshot(readable=True, tables={**snap.tables, "reads": ({"n": self.reads},)})


class CountingOracle(InMemoryProvider):
    """Each oracle read also returns how many reads came before it."""

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        ep = await super().provision(task, trial, params)
        return attrs.evolve(ep, oracle=_Counting(ep))


class LeftProcess(InMemoryProvider):
    """Each episode starts a child process its teardown never stops."""

    def __init__(self) -> None:
        super().__init__(form=SOUND_FORM)
        self.children: list[subprocess.Popen[bytes]] = []

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        # started, never waited for: a cat that reads a pipe nobody writes
        self.children.append(subprocess.Popen(["cat"], stdin=subprocess.PIPE))  # noqa: ASYNC220
        return await super().provision(task, trial, params)


class LeftPort(InMemoryProvider):
    """Each episode listens on a port its teardown never closes."""

    def __init__(self) -> None:
        super().__init__(form=SOUND_FORM)
        self.sockets: list[socket.socket] = []

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        self.sockets.append(sock)
        return await super().provision(task, trial, params)


class BadCapability(InMemoryProvider):
    provisioning_timeout = -1


class MisspeltCapability(InMemoryProvider):
    recommended_concurency = 4


BROKEN: dict[str, tuple[BenchmarkProvider, set[str], str]] = {
    "a store shared between episodes": (
        SharedEnvironment(),
        {"test_an_effect_does_not_leak_into_the_next_episode"},
        "give every episode a store of its own",
    ),
    "an oracle that is the arm's readback": (
        ReadbackOracle(form=SOUND_FORM),
        {"test_the_arms_handle_reaches_no_oracle"},
        "the EnvHandle reaches the oracle object itself",
    ),
    "an oracle frozen at provision": (
        FrozenOracle(form=SOUND_FORM),
        {"test_the_oracle_sees_a_write_made_through_the_product"},
        "not a copy taken at provision",
    ),
    "an oracle that counts its reads": (
        CountingOracle(form=SOUND_FORM),
        {"test_a_no_op_leaves_the_record_as_it_was"},
        "nothing that changes per read",
    ),
    "a child process left running": (
        LeftProcess(),
        {"test_teardown_and_stop_release_every_process_and_port"},
        "are still running",
    ),
    "a port left listening": (
        LeftPort(),
        {"test_teardown_and_stop_release_every_process_and_port"},
        "still listens on port",
    ),
    "repeated task ids": (
        InMemoryProvider(tasks=[memory_task(), memory_task()], form=SOUND_FORM),
        {"test_task_ids_are_unique_and_stable"},
        "repeated: fake::ok",
    ),
    "a negative provisioning timeout": (
        BadCapability(form=SOUND_FORM),
        {"test_declares_valid_capabilities"},
        "'provisioning_timeout' must be a positive",
    ),
    "a misspelt capability": (
        MisspeltCapability(form=SOUND_FORM),
        {"test_declares_valid_capabilities"},
        "did you mean 'recommended_concurrency'",
    ),
    "a correct action the product never stores": (
        InMemoryProvider(tasks=[memory_task("phantom")], form=SOUND_FORM),
        {REFERENCE_RUN, "test_the_oracle_sees_a_write_made_through_the_product"},
        "effect_verified did not succeed where the task says a correct action exists",
    ),
}


def contract_for(provider: BenchmarkProvider) -> type[ProviderContract]:
    class TestInMemory(ProviderContract):
        provider_name = "effectbench.testing:InMemoryProvider"

        def make_provider(self, workdir: Path) -> BenchmarkProvider:
            return provider

    return TestInMemory


def run_checks(contract: type[ProviderContract], tmp_path: Path) -> dict[str, str]:
    """Every check of ``contract`` called as pytest calls it: failed check -> message."""
    failed: dict[str, str] = {}
    try:
        for name in CHECKS:
            method = getattr(contract(), name)
            args = [tmp_path / name] if "tmp_path" in inspect.signature(method).parameters else []
            try:
                method(*args)
            except AssertionError as exc:
                failed[name] = str(exc)
    finally:
        contract.teardown_class()
    return failed


@pytest.fixture
def released() -> Iterator[None]:
    """Stop what the leaky fixtures left (the contract only reports it)."""
    yield
    for provider, _, _ in BROKEN.values():
        for child in getattr(provider, "children", []):
            child.kill()
            child.wait()
            if child.stdin is not None:
                child.stdin.close()
        for sock in getattr(provider, "sockets", []):
            sock.close()


def test_a_sound_provider_passes_every_check(tmp_path: Path) -> None:
    assert run_checks(contract_for(InMemoryProvider(form=SOUND_FORM)), tmp_path) == {}


@pytest.mark.usefixtures("released")
@pytest.mark.filterwarnings("ignore:provider 'fake'.*recommended_concurency:UserWarning")
@pytest.mark.parametrize("flaw", list(BROKEN))
def test_each_flaw_fails_the_check_that_names_it(tmp_path: Path, flaw: str) -> None:
    provider, expected, says = BROKEN[flaw]
    failed = run_checks(contract_for(provider), tmp_path)
    # the reference run is end to end, so most flaws also fail it; no other check may fail
    assert expected <= set(failed) <= expected | {REFERENCE_RUN}, failed
    assert any(says in message for message in failed.values()), failed


def test_the_registry_check_names_a_missing_entry_point() -> None:
    class TestMissing(ProviderContract):
        provider_name = "no-such-provider"

    with pytest.raises(AssertionError, match="no provider entry point is named 'no-such-provider'"):
        TestMissing().test_loads_through_the_registry_without_a_failed_row()


def test_a_task_glob_that_matches_nothing_is_named() -> None:
    class TestTypo(ProviderContract):
        provider_name = "effectbench.testing:InMemoryProvider"
        task_ids = ("fake::okk",)

    with pytest.raises(AssertionError, match="'fake::okk' matches no task"):
        TestTypo().test_a_no_op_leaves_the_record_as_it_was()
    TestTypo.teardown_class()
