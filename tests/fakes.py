"""An in-memory provider and small arms, for scheduler tests only.

Each episode gets its own dict-backed store; the oracle reads it, the driver writes
it. A task's ``fixture["mode"]`` injects one failure: provisioning that raises, a
deliberate skip, an oracle that is unreadable once, always, or from the post-read on,
a teardown that raises.
Usable from a subprocess as ``--provider fakes:FakeProvider`` with ``tests`` on PYTHONPATH.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import anyio

from effectbench.core.arm import TaskView
from effectbench.core.model import (
    AgentReport,
    Category,
    Effect,
    FieldEquals,
    JSONScalar,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Snapshot,
    TaskSpec,
)
from effectbench.core.provider import (
    EnvHandle,
    ProductResponse,
    ProvisionedEpisode,
    SkipEpisode,
)

MODES = (
    "ok",
    "phantom",
    "provision_fails",
    "skip",
    "oracle_flaky",
    "oracle_dead",
    "post_dead",
    "teardown_fails",
)


def make_task(mode: str, *, category: Category = Category.CONTROL, ca: bool = True) -> TaskSpec:
    return TaskSpec(
        task_id=f"fake::{mode}",
        title=f"fake {mode}",
        substrate="web",
        category=category,
        goal="Record the note for owner p1 and save it.",
        expected_effect=Effect(
            RecordWritten(table="notes", selector={"owner": "p1"}),
            (FieldEquals("note", ParamRef("note")),),
        ),
        oracle=OracleSpec(tables=("notes",)),
        correct_action_available=ca,
        params={"note": "note {tag}"},
        solution={"owner": "p1", "note": ParamRef("note")},
        fixture={"mode": mode},
    )


class _Store:
    def __init__(self) -> None:
        self.rows: list[dict[str, JSONScalar]] = []


class _Driver:
    def __init__(self, store: _Store, mode: str) -> None:
        self.store, self.mode = store, mode

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        if self.mode != "phantom":  # phantom: the screen says saved, nothing is stored
            self.store.rows.append({"id": len(self.store.rows) + 1, **values})
        return ProductResponse(screen_says_saved=True, status=200, message="saved")


class _Oracle:
    def __init__(self, store: _Store, mode: str) -> None:
        self.store, self.mode, self.reads = store, mode, 0

    async def read(self) -> Snapshot:
        self.reads += 1
        if self.mode == "oracle_hangs_once" and self.reads == 2:  # the first post-read
            await anyio.sleep_forever()
        dead = (
            self.mode == "oracle_dead"
            or (self.mode == "oracle_flaky" and self.reads == 2)  # the first post-read only
            or (self.mode == "post_dead" and self.reads > 1)  # readable before the arm, never after
        )
        if dead:
            return Snapshot.unreadable("store offline")
        return Snapshot(readable=True, tables={"notes": tuple(dict(r) for r in self.store.rows)})


class FakeProvider:
    """In-memory provider; ``modes`` picks its tasks (default: just "ok")."""

    name = "fake"
    version = "1.0"

    def __init__(self, modes: Sequence[str] = ("ok",), *, n_tasks: int = 1) -> None:
        self._tasks = [make_task(m) for m in modes]
        if n_tasks > 1:  # many identical ok-tasks, for the overhead bench
            self._tasks = [
                TaskSpec(
                    **{
                        **{
                            a: getattr(t, a)
                            for a in (
                                "title",
                                "substrate",
                                "category",
                                "goal",
                                "expected_effect",
                                "oracle",
                                "correct_action_available",
                                "params",
                                "solution",
                                "fixture",
                            )
                        },
                        "task_id": f"{t.task_id}{i}",
                    }
                )
                for t in self._tasks
                for i in range(n_tasks)
            ]
        self.started = 0
        self.stopped = 0
        self.torn_down = 0

    def tasks(self) -> Sequence[TaskSpec]:
        return list(self._tasks)

    async def start(self) -> None:
        self.started += 1

    async def stop(self) -> None:
        self.stopped += 1

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        mode = str(task.fixture.get("mode", "ok"))
        if mode == "provision_fails":
            raise ConnectionError("database container did not come up")
        if mode == "provision_hangs":
            await anyio.sleep_forever()
        if mode == "skip":
            raise SkipEpisode("this host has no desktop substrate")
        store = _Store()

        async def teardown() -> None:
            self.torn_down += 1
            if mode == "teardown_fails":
                raise OSError("could not remove the episode database")

        return ProvisionedEpisode(
            env=EnvHandle(channels={"base_url": "memory://"}, driver=_Driver(store, mode)),
            oracle=_Oracle(store, mode),
            teardown=teardown,
        )


def fake_all() -> FakeProvider:
    """Every failure mode as its own task."""
    return FakeProvider(MODES)


class ScriptedArm:
    """Submits the task's solution once and trusts the screen."""

    name = "scripted"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        assert env.driver is not None and task.solution is not None
        env.telemetry.action("submit", fields=len(task.solution))
        response = await env.driver.submit(task.solution)
        return AgentReport(
            reported_success=response.screen_says_saved, halted=not response.screen_says_saved
        )


class RaisingArm:
    name = "raising"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        env.telemetry.action("click", target="save")
        raise RuntimeError("the agent crashed")


class HangingArm:
    name = "hanging"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


# --------------------------------------------------------------------------- comparing runs


def strip_timing(value: object) -> object:
    """Drop wall-clock keys (``*_ms``) and log-line pointers (``evidence``), recursively:
    the only fields allowed to differ between two runs of one plan."""
    if isinstance(value, dict):
        return {
            k: strip_timing(v)
            for k, v in value.items()
            if not k.endswith("_ms") and k != "evidence"
        }
    if isinstance(value, list):
        return [strip_timing(v) for v in value]
    return value


def load_run(run_dir: object) -> tuple[dict[str, object], object]:
    """(results.jsonl rows keyed by episode id, metrics.json), without timing fields.

    Fails when an episode appears twice in results.jsonl."""
    from pathlib import Path

    import orjson

    root = Path(str(run_dir))
    rows = [
        orjson.loads(line) for line in (root / "results.jsonl").read_bytes().splitlines() if line
    ]
    results = {r["episode_id"]: strip_timing(r) for r in rows}
    assert len(results) == len(rows), "an episode appears twice in results.jsonl"
    return results, strip_timing(orjson.loads((root / "metrics.json").read_bytes()))
