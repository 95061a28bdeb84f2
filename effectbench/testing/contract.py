"""``ProviderContract``: the checks every provider must pass, as a test base a plugin's
own tests subclass (in the manner of the eventsourcing library's recorder test cases).

A subclass names its provider and a few tasks; pytest then runs every ``test_*`` method
below against it. Each check uses only what a third party has (the registry, the
provider protocol, the public arms and ``effectbench.api``), and each failure says what
to fix. The checks that need a started provider share one, started on an event loop of
its own thread on first use and stopped in ``teardown_class``; the teardown check and
the reference run start their own.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, ClassVar, Final

import anyio
import attrs
import orjson
from anyio.from_thread import BlockingPortal, start_blocking_portal

from effectbench.arms.baselines import EffectVerifiedArm
from effectbench.core.arm import Arm
from effectbench.core.capabilities import (
    ProviderCapabilities,
    capability_hints,
    capability_problems,
)
from effectbench.core.errors import EffectBenchError
from effectbench.core.listening import descendants, listening_ports, read_proc
from effectbench.core.model import (
    Category,
    JSONScalar,
    Snapshot,
    Substrate,
    TaskSpec,
    resolve_value,
    trial_params,
)
from effectbench.core.provider import BenchmarkProvider, ProvisionedEpisode
from effectbench.core.rundir import RunDir
from effectbench.run.registry import PROVIDERS, Registry

__all__ = ["ProviderContract"]

_SCALARS: Final = (str, bytes, int, float, bool, type(None))


@attrs.define
class _Shared:
    """One started provider on a loop of its own thread, shared by a class's checks."""

    provider: BenchmarkProvider
    portal: BlockingPortal
    stack: ExitStack

    @classmethod
    def open(cls, make: Callable[[Path], BenchmarkProvider]) -> _Shared:
        stack = ExitStack()
        try:
            workdir = Path(tempfile.mkdtemp(prefix="effectbench-contract-"))
            stack.callback(shutil.rmtree, workdir, ignore_errors=True)
            portal = stack.enter_context(start_blocking_portal())
            provider = make(workdir)
            portal.call(provider.start)
            stack.callback(portal.call, provider.stop)
        except BaseException:
            stack.close()
            raise
        return cls(provider, portal, stack)


class ProviderContract:
    """What every provider must do, one named check per test method.

    Subclass it in a class whose name starts with ``Test`` and set ``provider_name``
    (what ``--provider`` takes) and ``task_ids`` (globs, as ``--task``; keep it to a few
    tasks, one with a correct action among them: the checks provision episodes of
    them). Override ``make_provider`` when the registry's instance is not what you test.
    """

    provider_name: ClassVar[str] = ""
    """The registry name (or ``module:attribute`` reference) of the provider."""
    task_ids: ClassVar[tuple[str, ...]] = ()
    """The tasks the episode checks use (globs); () is every task."""

    _shared: ClassVar[_Shared | None] = None

    def make_provider(self, workdir: Path) -> BenchmarkProvider:
        """A new, unstarted provider keeping its files under ``workdir``: the registry's,
        handed ``workdir`` the way the harness hands its state root."""
        provider = Registry().provider(self.provider_name)
        hook = ProviderCapabilities.of(provider).use_state_dir
        if hook is not None:
            hook(workdir)
        return provider

    def make_reference_arm(self) -> Arm:
        """The arm that must succeed wherever a task declares a correct action."""
        return EffectVerifiedArm()

    @classmethod
    def teardown_class(cls) -> None:
        """Stop the shared provider (pytest calls this once the class's tests are done)."""
        shared = cls.__dict__.get("_shared")
        if shared is not None:
            cls._shared = None
            shared.stack.close()

    # the registry and the capabilities

    def test_loads_through_the_registry_without_a_failed_row(self) -> None:
        name = self.provider_name
        assert name, f"{type(self).__name__}: set provider_name to what --provider takes"
        if ":" in name:
            Registry().provider(name)  # a reference: a PluginError says what is wrong
            return
        rows = [r for r in Registry().load_all(PROVIDERS) if r.info.name == name]
        assert rows, (
            f"no provider entry point is named {name!r}: register it under "
            '[project.entry-points."effectbench.providers"] and reinstall the package'
        )
        failed = [r.error for r in rows if r.status == "failed"]
        assert not failed, f"`effectbench providers` shows {name!r} as failed: {failed[0]}"

    def test_declares_valid_capabilities(self, tmp_path: Path) -> None:
        provider = self.make_provider(tmp_path)
        problems = capability_problems(provider, "provider")
        assert not problems, f"fix the provider's optional members: {'; '.join(problems)}"
        hints = capability_hints(provider, "provider")
        assert not hints, f"rename or remove (docs/writing-a-provider.md): {'; '.join(hints)}"

    # the tasks

    def test_task_ids_are_unique_and_stable(self, tmp_path: Path) -> None:
        provider = self.make_provider(tmp_path)
        ids = [t.task_id for t in provider.tasks()]
        assert ids, "tasks() returned no task: a provider needs at least one"
        twice = sorted({i for i in ids if ids.count(i) > 1})
        assert not twice, f"give each task its own task_id; repeated: {', '.join(twice)}"
        again = [t.task_id for t in provider.tasks()]
        assert again == ids, "tasks() must return the same tasks each call (the plan hashes them)"

    def test_tasks_have_valid_categories_and_substrates(self, tmp_path: Path) -> None:
        for task in self.make_provider(tmp_path).tasks():
            assert isinstance(task, TaskSpec), f"tasks() must yield TaskSpec, got {task!r}"
            assert isinstance(task.category, Category), (
                f"{task.task_id}: category must be an effectbench.model.Category"
            )
            assert isinstance(task.substrate, Substrate), (
                f"{task.task_id}: substrate must be an effectbench.model.Substrate"
            )

    def test_declared_effects_resolve_for_a_trial(self, tmp_path: Path) -> None:
        for task in self.make_provider(tmp_path).tasks():
            if not task.effect_declared:
                continue
            params = trial_params(task, 0)
            effect = task.expected_effect.resolve(params)
            assert effect.is_resolved, (
                f"{task.task_id}: its expected effect names a ParamRef no param defines; "
                f"add it to params (defined: {', '.join(task.params) or 'none'})"
            )
            if task.solution is not None:
                _resolved_solution(task, params)

    # the episodes

    def test_two_episodes_of_a_task_start_from_equal_records(self) -> None:
        task = self._writing_task()

        async def check(provider: BenchmarkProvider) -> None:
            first, second = await _episode(provider, task), await _episode(provider, task)
            try:
                a, b = await _read(first), await _read(second)
                assert a.tables == b.tables, (
                    f"{task.task_id}: two fresh episodes read different records: seed every "
                    f"episode's store from the same state ({_difference(a, b)})"
                )
            finally:
                await first.teardown()
                await second.teardown()

        self._on_shared(check)

    def test_an_effect_does_not_leak_into_the_next_episode(self) -> None:
        task = self._writing_task()

        async def check(provider: BenchmarkProvider) -> None:
            first = await _episode(provider, task)
            before = await _read(first)
            await _submit(first, task)
            during = await _episode(provider, task)
            await first.teardown()
            after = await _episode(provider, task)
            try:
                for label, ep in (("while", during), ("after", after)):
                    seen = await _read(ep)
                    assert seen.tables == before.tables, (
                        f"{task.task_id}: an episode provisioned {label} another one wrote "
                        "sees that write: give every episode a store of its own "
                        f"({_difference(before, seen)})"
                    )
            finally:
                await during.teardown()
                await after.teardown()

        self._on_shared(check)

    def test_the_oracle_sees_a_write_made_through_the_product(self) -> None:
        task = self._writing_task()

        async def check(provider: BenchmarkProvider) -> None:
            ep = await _episode(provider, task)
            try:
                pre = await _read(ep)
                await _submit(ep, task)
                post = await _read(ep)
                assert post.tables != pre.tables, (
                    f"{task.task_id}: the product's driver submitted the solution and the "
                    "oracle read no change: read the system of record itself on every "
                    "read, not a copy taken at provision"
                )
            finally:
                await ep.teardown()

        self._on_shared(check)

    def test_a_no_op_leaves_the_record_as_it_was(self) -> None:
        task = self._writing_task()

        async def check(provider: BenchmarkProvider) -> None:
            ep = await _episode(provider, task)
            try:
                pre, post = await _read(ep), await _read(ep)
                assert post.tables == pre.tables, (
                    f"{task.task_id}: two oracle reads with nothing done between them "
                    "differ: return the stored rows only, nothing that changes per read "
                    f"({_difference(pre, post)})"
                )
            finally:
                await ep.teardown()

        self._on_shared(check)

    def test_the_arms_handle_reaches_no_oracle(self) -> None:
        task = self._writing_task()

        async def check(provider: BenchmarkProvider) -> None:
            ep = await _episode(provider, task)
            try:
                leak = _oracle_leak(ep, _own_modules(provider))
                assert leak is None, (
                    f"{task.task_id}: {leak}: the oracle must read over a path the arm "
                    "never receives, not through the product's driver or readback"
                )
            finally:
                await ep.teardown()

        self._on_shared(check)

    def test_the_reference_arm_succeeds_where_a_correct_action_exists(self, tmp_path: Path) -> None:
        from effectbench.api import evaluate_provider

        tasks = [t for t in self._chosen() if t.correct_action_available and t.solution]
        assert tasks, _NO_WRITING_TASK
        arm = self.make_reference_arm()
        try:
            result = evaluate_provider(
                [arm],
                self.make_provider(tmp_path / "state"),
                trials=1,
                task_globs=[t.task_id for t in tasks],
                out=tmp_path / "run",
                report=False,
            )
        except EffectBenchError as exc:
            raise AssertionError(f"the harness refused to run the provider: {exc}") from None
        rows = _results(result.run_dir)
        wrong = {r["task_id"]: _why(r) for r in rows if r["outcome"] != "SUCCESS"}
        assert not wrong, (
            f"{arm.name} did not succeed where the task says a correct action exists; fix the "
            f"task's solution or correct_action_available, or the product: {wrong}"
        )

    def test_teardown_and_stop_release_every_process_and_port(self, tmp_path: Path) -> None:
        task = self._writing_task()
        before = _held()

        async def check() -> None:
            provider = self.make_provider(tmp_path)
            await provider.start()
            try:
                started = _held()
                ep = await _episode(provider, task)
                await ep.teardown()
                await ep.teardown()
                _assert_released(started, "teardown() (and a second teardown())")
            finally:
                await provider.stop()
            await provider.stop()

        anyio.run(check)
        _assert_released(before, "stop() (and a second stop())")

    # helpers

    def _chosen(self) -> list[TaskSpec]:
        with tempfile.TemporaryDirectory(prefix="effectbench-contract-") as workdir:
            tasks = list(self.make_provider(Path(workdir)).tasks())
        if not self.task_ids:
            return tasks
        for glob in self.task_ids:
            assert any(fnmatch.fnmatchcase(t.task_id, glob) for t in tasks), (
                f"task_ids: {glob!r} matches no task; the provider has "
                f"{', '.join(t.task_id for t in tasks[:10])}"
            )
        return [t for t in tasks if any(fnmatch.fnmatchcase(t.task_id, g) for g in self.task_ids)]

    def _writing_task(self) -> TaskSpec:
        """The first chosen task whose solution is a correct action."""
        task = next((t for t in self._chosen() if t.correct_action_available and t.solution), None)
        assert task is not None, _NO_WRITING_TASK
        return task

    def _on_shared(self, check: Callable[[BenchmarkProvider], Awaitable[None]]) -> None:
        cls = type(self)
        if cls.__dict__.get("_shared") is None:
            cls._shared = _Shared.open(self.make_provider)
        shared = cls._shared
        assert shared is not None
        shared.portal.call(check, shared.provider)


_NO_WRITING_TASK: Final = (
    "task_ids must include a task with correct_action_available=True and a solution: the "
    "episode checks submit it"
)


def _resolved_solution(task: TaskSpec, params: Mapping[str, str]) -> dict[str, JSONScalar]:
    assert task.solution is not None
    try:
        return {k: resolve_value(v, params) for k, v in task.solution.items()}
    except KeyError as exc:
        raise AssertionError(
            f"{task.task_id}: its solution names the param {exc}, which params does not define"
        ) from None


async def _episode(provider: BenchmarkProvider, task: TaskSpec) -> ProvisionedEpisode:
    ep = await provider.provision(task, 0, trial_params(task, 0))
    assert isinstance(ep, ProvisionedEpisode), "provision() must return a ProvisionedEpisode"
    return ep


async def _read(ep: ProvisionedEpisode) -> Snapshot:
    snap = await ep.oracle.read()
    assert snap.readable, f"a fresh episode's oracle read was unreadable: {snap.error}"
    return snap


async def _submit(ep: ProvisionedEpisode, task: TaskSpec) -> None:
    driver = ep.env.driver
    assert driver is not None, (
        "EnvHandle(driver=...) is None: the reference arms submit through the product driver"
    )
    await driver.submit(_resolved_solution(task, trial_params(task, 0)))


def _difference(a: Snapshot, b: Snapshot) -> str:
    tables = sorted(t for t in {*a.tables, *b.tables} if a.rows(t) != b.rows(t))
    return f"tables that differ: {', '.join(tables) or 'none'}"


def _own_modules(provider: BenchmarkProvider) -> tuple[str, ...]:
    """Modules whose objects the reachability walk looks inside: the provider's package
    and effectbench's (not aiohttp's or the event loop's)."""
    return (type(provider).__module__.split(".")[0], "effectbench")


def _children(obj: object, ours: tuple[str, ...]) -> Sequence[object]:
    if isinstance(obj, Mapping):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if not type(obj).__module__.startswith(ours):
        return []
    if hasattr(obj, "__attrs_attrs__"):
        return [getattr(obj, a.name, None) for a in obj.__attrs_attrs__]
    return list(getattr(obj, "__dict__", {}).values())


def _reachable(root: object, ours: tuple[str, ...]) -> Iterator[object]:
    """Every object reachable from ``root`` through containers and the attributes of our
    own objects, each once."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if isinstance(obj, _SCALARS) or id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        stack.extend(_children(obj, ours))


def _oracle_leak(ep: ProvisionedEpisode, ours: tuple[str, ...]) -> str | None:
    """How the arm's handle reaches the harness's read path, or None."""
    if any(obj is ep.oracle for obj in _reachable(ep.env, ours)):
        return "the EnvHandle reaches the oracle object itself"
    paths = {str(v) for v in _children(ep.oracle, ours) if isinstance(v, (str, Path))}
    paths = {p for p in paths if os.sep in p and os.path.exists(p)}
    shown = [v for v in ep.env.channels.values() if any(p in v for p in paths)]
    if shown:
        return f"a channel gives the arm the oracle's store path ({shown[0]})"
    return None


def _why(row: Mapping[str, Any]) -> str:
    """An episode's result in a phrase: outcome (or failure class), true state, reasons."""
    reasons = "; ".join(row.get("verdict_reasons") or ())
    what = row.get("outcome") or f"failed ({row.get('failure_class')})"
    return f"{what}, true state {row.get('true_state')}" + (f": {reasons}" if reasons else "")


def _results(run_dir: Path) -> list[dict[str, Any]]:
    lines = RunDir(run_dir).results.read_bytes().splitlines()
    return [orjson.loads(line) for line in lines if line]


# what a process holds: its live descendants and its listening sockets


def _held() -> tuple[frozenset[int], frozenset[str]]:
    return descendants(os.getpid()), _listening()


def _assert_released(earlier: tuple[frozenset[int], frozenset[str]], after: str) -> None:
    processes, ports = _held()
    extra = sorted(processes - earlier[0])
    assert not extra, (
        f"after {after} these processes the provider started are still running: "
        f"{_commands(extra)}; stop them there and wait for them to exit"
    )
    listening = sorted(ports - earlier[1])
    assert not listening, (
        f"after {after} this process still listens on {', '.join(listening)}: close the "
        "servers it started"
    )


def _listening() -> frozenset[str]:
    """``port N`` of every TCP socket this process listens on."""
    return frozenset(f"port {port}" for port in listening_ports([os.getpid()]))


def _commands(pids: Sequence[int]) -> str:
    shown = []
    for pid in pids:
        raw = read_proc(f"/proc/{pid}/cmdline") or ""
        shown.append(f"{pid} ({raw.replace(chr(0), ' ').strip()[:80] or '?'})")
    return ", ".join(shown)
