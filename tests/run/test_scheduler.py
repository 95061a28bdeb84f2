"""The scheduler's event protocol, plan determinism and concurrency bound (in-memory provider)."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import anyio
import pytest
from schema_check import assert_every_line_is_a_typed_event

from effectbench.core.arm import TaskView
from effectbench.core.events import TERMINAL_TYPES
from effectbench.core.hashing import content_hash
from effectbench.core.model import AgentReport, trial_params
from effectbench.core.provider import EnvHandle
from effectbench.log.reader import read_log, verify_log
from effectbench.run.plan import PlanError, ProviderInfo, build_plan, diff_plans, episodes
from effectbench.run.scheduler import Scheduler, SchedulerOptions, load_resume_state
from effectbench.testing import InMemoryProvider, ScriptedArm

INFO = ProviderInfo("fake", "1.0")


def _run(
    tmp_path: Path, provider: InMemoryProvider, arms: dict[str, object], trials: int, **opts: object
) -> Path:
    plan = build_plan(INFO, provider.tasks(), list(arms), trials)
    sched = Scheduler(plan, provider, arms, tmp_path, run_id="r1", options=SchedulerOptions(**opts))  # type: ignore[arg-type]
    anyio.run(sched.run)
    return tmp_path / "events.jsonl"


def test_one_episode_emits_the_lifecycle_in_order(tmp_path: Path) -> None:
    log = _run(tmp_path, InMemoryProvider(("ok",)), {"scripted": ScriptedArm()}, 1)
    events = list(read_log(log))
    assert [e.type for e in events] == [
        "run.started",
        "episode.planned",
        "episode.provisioned",
        "episode.pre_snapshot",
        "episode.arm_started",
        "episode.action",
        "episode.telemetry",
        "episode.reported",
        "episode.post_read",
        "episode.finished",
        "run.finished",
    ]
    ep = "scripted::fake::ok::t0"
    assert {e.ep for e in events[1:-1]} == {ep}
    planned = events[1].data
    assert planned["params"] == trial_params(InMemoryProvider().tasks()[0], 0)
    assert planned["effect"]["field_equals"][0]["expected"] == planned["params"]["note"]
    from effectbench.core.codec import converter
    from effectbench.core.model import Effect

    assert planned["effect_hash"] == content_hash(converter.structure(planned["effect"], Effect))
    post = events[8].data["snapshot"]
    assert post["readable"] and post["tables"]["notes"][0]["note"] == planned["params"]["note"]
    telemetry = events[6].data
    assert telemetry == {
        "model_calls": None,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
        "actions": 1,
    }
    started = events[0].data
    assert started["concurrency"] == 32 and len(started["plan_hash"]) == 64
    assert events[-1].data["interrupted"] is False
    assert verify_log(log).ok


def test_plan_order_ids_and_hash_ignore_execution_knobs() -> None:
    provider = InMemoryProvider(("ok", "phantom"))
    plan = build_plan(INFO, provider.tasks(), ["a", "b"], 3)
    ids = [s.episode_id for s in episodes(plan)]
    assert ids[:4] == [
        "a::fake::ok::t0",
        "a::fake::ok::t1",
        "a::fake::ok::t2",
        "a::fake::phantom::t0",
    ]
    assert len(ids) == len(set(ids)) == 12 == plan.n_episodes
    again = build_plan(INFO, provider.tasks(), ["a", "b"], 3)
    assert again.plan_hash == plan.plan_hash
    assert build_plan(INFO, provider.tasks(), ["a", "b"], 4).plan_hash != plan.plan_hash
    assert build_plan(INFO, provider.tasks(), ["b", "a"], 3).plan_hash != plan.plan_hash
    # how tasks were selected and how plugins were named are recorded, not hashed ...
    same = build_plan(INFO, provider.tasks(), ["a", "b"], 3, ["fake::*"], refs={"arms": ["m:A"]})
    assert same.plan_hash == plan.plan_hash
    # ... but every task's definition, the provider and the scoring versions are
    import attrs

    edited = [attrs.evolve(provider.tasks()[0], goal="Something else."), provider.tasks()[1]]
    assert build_plan(INFO, edited, ["a", "b"], 3).plan_hash != plan.plan_hash
    assert build_plan(ProviderInfo("fake", "1.1"), provider.tasks(), ["a", "b"], 3).plan_hash != (
        plan.plan_hash
    )
    versions = {**plan.versions, "scoring": "other"}
    assert (
        build_plan(INFO, provider.tasks(), ["a", "b"], 3, versions=versions).plan_hash
        != plan.plan_hash
    )


def test_diff_plans_names_each_difference() -> None:
    provider = InMemoryProvider(("ok", "phantom"))
    a = build_plan(INFO, provider.tasks(), ["x"], 3).identity()
    b = build_plan(ProviderInfo("fake", "2.0"), provider.tasks()[:1], ["x", "y"], 5).identity()
    diffs = " | ".join(diff_plans(a, b))
    assert "provider version" in diffs and "tasks: missing now: fake::phantom" in diffs
    assert "arms:" in diffs and "trials: recorded 3, now 5" in diffs
    assert diff_plans(a, a) == []


def test_a_glob_that_selects_nothing_is_refused() -> None:
    with pytest.raises(PlanError, match="selects no task"):
        build_plan(INFO, InMemoryProvider().tasks(), ["x"], 1, ["nope*"])
    with pytest.raises(PlanError, match="positive"):
        build_plan(INFO, InMemoryProvider().tasks(), ["x"], 0)


class _CountingArm:
    """Holds every episode until ``bound`` run at once (or every episode has started), so
    the peak reaches the bound however slowly the machine starts them; then, before
    releasing them, waits until every other task is blocked, so an episode the scheduler
    would start beyond the bound has started (and is counted) first."""

    name = "counting"

    def __init__(self, bound: int, total: int) -> None:
        self.bound, self.total = bound, total
        self.live = self.started = self.peak = 0
        self.full = anyio.Event()

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        self.live += 1
        self.started += 1
        self.peak = max(self.peak, self.live)
        if not self.full.is_set() and (self.live == self.bound or self.started == self.total):
            await anyio.wait_all_tasks_blocked()
            self.full.set()
        await self.full.wait()
        self.live -= 1
        return AgentReport(reported_success=False, halted=True)


@pytest.mark.parametrize("concurrency", [1, 3, 16])
def test_concurrency_is_a_hard_bound_and_every_episode_ends_once(
    tmp_path: Path, concurrency: int
) -> None:
    arm = _CountingArm(concurrency, 24)
    provider = InMemoryProvider(("ok", "phantom"))
    log = _run(tmp_path, provider, {"counting": arm}, 12, concurrency=concurrency)
    assert arm.peak == concurrency
    terminals = Counter(e.ep for e in read_log(log) if e.type in TERMINAL_TYPES)
    assert len(terminals) == 24 and set(terminals.values()) == {1}
    assert provider.torn_down == 24 and provider.started == provider.stopped == 1


def test_events_of_concurrent_episodes_stay_ordered_per_episode(tmp_path: Path) -> None:
    log = _run(
        tmp_path,
        InMemoryProvider(("ok", "phantom")),
        {"scripted": ScriptedArm()},
        20,
        concurrency=8,
    )
    per_ep: dict[str, list[str]] = defaultdict(list)
    for e in read_log(log):
        if e.ep:
            per_ep[e.ep].append(e.type)
    assert len(per_ep) == 40
    for types in per_ep.values():
        assert types[0] == "episode.planned" and types[-1] == "episode.finished"


def test_resume_state_sees_terminated_and_unterminated(tmp_path: Path) -> None:
    from effectbench.log.reader import write_events_sync

    log = tmp_path / "events.jsonl"
    write_events_sync(
        log,
        [
            (
                "run.started",
                {"run_id": "r", "plan": {"trials": 1}, "plan_hash": "h", "versions": {}},
                None,
            ),
            ("episode.planned", {}, "a"),
            ("episode.planned", {}, "b"),
            ("episode.finished", {}, "a"),
            ("episode.planned", {}, "c"),
            ("episode.abandoned", {"reason": "x"}, "c"),
        ],
    )
    with open(log, "ab") as f:
        f.write(b'{"v":1,"seq":6,"type":"episode.fin')  # a torn tail
    state = load_resume_state(log)
    assert state.terminated == {"a"} and state.unterminated == ("b",) and state.torn_tail
    assert state.plan_hash == "h" and state.run_id == "r"


def test_a_run_directory_in_use_is_refused(tmp_path: Path) -> None:
    import fcntl
    import os

    from effectbench.run.scheduler import ResumeError

    log = tmp_path / "events.jsonl"
    fd = os.open(log, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(ResumeError, match="in use by another effectbench process"):
            _run(tmp_path, InMemoryProvider(("ok",)), {"scripted": ScriptedArm()}, 1)
    finally:
        os.close(fd)
    assert log.read_bytes() == b""


def test_a_failing_provider_stop_is_logged_not_fatal(tmp_path: Path) -> None:
    class LateStop(InMemoryProvider):
        async def stop(self) -> None:
            raise RuntimeError("stop failed")

    log = _run(tmp_path, LateStop(("ok",)), {"scripted": ScriptedArm()}, 2)
    last = list(read_log(log))[-1]
    assert last.type == "run.finished" and last.data == {
        "interrupted": False,
        "episodes_finished": 2,
        "episodes_failed": 0,
    }


def test_the_api_inside_and_outside_an_event_loop(tmp_path: Path) -> None:
    from effectbench.api import RunError, evaluate_provider, evaluate_provider_async

    async def inside() -> None:
        result = await evaluate_provider_async(
            ScriptedArm(), InMemoryProvider(("ok",)), trials=2, out=tmp_path / "a"
        )
        assert result.metrics["arms"]["scripted"]["task_success"]["numerator"] == 2
        assert result.log_path == tmp_path / "a" / "events.jsonl" and "scripted" in result.summary
        with pytest.raises(RunError, match="await evaluate_provider_async"):
            evaluate_provider(ScriptedArm(), InMemoryProvider(("ok",)), out=tmp_path / "b")

    anyio.run(inside)
    result = evaluate_provider(
        [ScriptedArm()], InMemoryProvider(("ok",)), trials=1, out=tmp_path / "c"
    )
    assert not result.interrupted and result.run_dir == tmp_path / "c"


def test_oracle_backoff_doubles_up_to_its_cap() -> None:
    opts = SchedulerOptions(oracle_backoff=0.05, oracle_backoff_max=0.3)
    assert [opts.oracle_delay(a) for a in (1, 2, 3, 4, 5)] == [0.05, 0.1, 0.2, 0.3, 0.3]
    assert opts.oracle_delay(5000) == 0.3  # no overflow however many re-reads are asked for
    for bad in ({"oracle_backoff": -1.0}, {"oracle_backoff_max": float("nan")}):
        with pytest.raises(ValueError, match="oracle"):
            SchedulerOptions(**bad)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_many_oracle_rereads_stay_bounded_in_time(tmp_path: Path) -> None:
    log = _run(
        tmp_path,
        InMemoryProvider(("oracle_dead",)),
        {"scripted": ScriptedArm()},
        1,
        oracle_retries=40,
        oracle_backoff=0.001,
        oracle_backoff_max=0.001,
    )
    failed = [e.data for e in read_log(log) if e.type == "episode.failed"]
    assert failed[0]["failure_class"] == "evaluation" and "after 41 read(s)" in failed[0]["error"]


@pytest.mark.timeout(60)
def test_a_hanging_provider_stop_is_bounded(tmp_path: Path) -> None:
    class HangingStop(InMemoryProvider):
        async def stop(self) -> None:
            await anyio.sleep_forever()

    log = _run(
        tmp_path, HangingStop(("ok",)), {"scripted": ScriptedArm()}, 1, teardown_timeout=0.05
    )
    last = list(read_log(log))[-1]
    assert last.type == "run.finished" and last.data["episodes_finished"] == 1


def test_a_resume_refuses_a_log_that_grew_after_it_was_read(tmp_path: Path) -> None:
    """Another process finished episodes between our read of the log and our lock on it:
    resuming from the stale read would abandon and rerun finished episodes."""
    from effectbench.log.reader import write_events_sync
    from effectbench.run.scheduler import ResumeError

    provider = InMemoryProvider(("ok",))
    log = _run(tmp_path, provider, {"scripted": ScriptedArm()}, 2)
    lines = log.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"episode.finished"' in line)
    log.write_bytes(b"".join(lines[:cut]))  # killed before t0 finished
    state = load_resume_state(log)
    assert "scripted::fake::ok::t0" in state.unterminated
    write_events_sync(log, [("episode.finished", {}, "scripted::fake::ok::t0")], append=True)
    before = log.read_bytes()
    plan = build_plan(INFO, provider.tasks(), ["scripted"], 2)
    sched = Scheduler(plan, provider, {"scripted": ScriptedArm()}, tmp_path, run_id="r1")
    with pytest.raises(ResumeError, match="changed after it was read"):
        anyio.run(sched.run, state)
    assert log.read_bytes() == before


def test_model_calls_an_arm_records_become_telemetry_and_cost(tmp_path: Path) -> None:
    """Arm -> Telemetry.model_call -> episode.telemetry -> results row -> metrics: summed when
    every call reports a field, null (never a partial zero) when any call lacks it."""
    import orjson

    from effectbench.api import evaluate_provider
    from effectbench.core.provider import ModelCall

    class Billed(ScriptedArm):
        name = "billed"

        async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
            env.telemetry.model_call(ModelCall(input_tokens=100, output_tokens=10, cost_usd=0.25))
            env.telemetry.model_call(ModelCall(input_tokens=50, output_tokens=5, cost_usd=None))
            env.telemetry.model_call(ModelCall(input_tokens=1, output_tokens=1, cost_usd=None))
            return await super().run(task, env)

    class Priced(ScriptedArm):
        name = "priced"

        async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
            env.telemetry.model_call(ModelCall(input_tokens=7, output_tokens=3, cost_usd=0.5))
            return await super().run(task, env)

    result = evaluate_provider(
        [Billed(), Priced()], InMemoryProvider(("ok",)), trials=2, out=tmp_path / "run"
    )
    assert_every_line_is_a_typed_event(result.log_path)  # with and without model calls
    rows = [orjson.loads(x) for x in (result.run_dir / "results.jsonl").read_bytes().splitlines()]
    tel = {r["arm"]: r["telemetry"] for r in rows}
    assert (
        tel["billed"]["model_calls"],
        tel["billed"]["input_tokens"],
        tel["billed"]["output_tokens"],
    ) == (3, 151, 16)
    assert tel["billed"]["cost_usd"] is None  # one call had no price: unknown, not 0.25
    assert (tel["priced"]["model_calls"], tel["priced"]["cost_usd"]) == (1, 0.5)
    arms = result.metrics["arms"]
    assert arms["priced"]["telemetry"]["cost"]["eligible_usd"] == 1.0  # 2 trials x 0.5
    assert arms["billed"]["telemetry"]["cost"]["eligible_usd"] is None
    assert arms["billed"]["telemetry"]["model_calls"]["mean"] == 3


def test_a_providers_injection_records_become_events_after_the_arms_actions(
    tmp_path: Path,
) -> None:
    """``ProvisionedEpisode.injections`` is read after the arm returns (or fails): each
    record is one ``episode.injected`` event; a source that raises becomes one record
    saying so, and the episode is still scored."""
    import attrs

    from effectbench.provider import ActionRecord, ProvisionedEpisode

    class Injecting(InMemoryProvider):
        async def provision(self, task, trial, params):  # type: ignore[no-untyped-def]
            got: ProvisionedEpisode = await super().provision(task, trial, params)
            if trial == 0:
                records = (ActionRecord("proxy.partial", {"path": "/x", "forwarded": 1}),)
                return attrs.evolve(got, injections=lambda: records)

            def broken() -> tuple[ActionRecord, ...]:
                raise RuntimeError("proxy gone")

            return attrs.evolve(got, injections=broken)

    log = _run(tmp_path, Injecting(("ok",)), {"scripted": ScriptedArm()}, 2)
    by_ep: dict[str, list[tuple[str, object]]] = defaultdict(list)
    for e in read_log(log):
        if e.ep is not None:
            by_ep[e.ep].append((e.type, e.data))
    first = [t for t, _ in by_ep["scripted::fake::ok::t0"]]
    assert first[4:7] == ["episode.action", "episode.injected", "episode.telemetry"]
    assert by_ep["scripted::fake::ok::t0"][5][1] == {
        "kind": "proxy.partial",
        "detail": {"path": "/x", "forwarded": 1},
    }
    second = dict(by_ep["scripted::fake::ok::t1"])
    assert second["episode.injected"] == {
        "kind": "injections_unavailable",
        "detail": {"error": "RuntimeError: proxy gone"},
    }
    assert second["episode.telemetry"]["actions"] == 1  # injections are not arm actions
    assert "episode.finished" in second
