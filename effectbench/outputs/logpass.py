"""One pass over a run's log: the run's facts, the metrics accumulator and the
results rows spilled to disk in plan order. The sharded pass (parallel.py) builds the
same LogPass in two processes."""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, NoReturn

import attrs
import orjson

from effectbench.core.errors import ArtifactError
from effectbench.core.events import ArmScreenshot, RunFinished, RunResumed, RunStarted
from effectbench.core.rundir import LOG_FILE
from effectbench.log.reader import LoggedEvent, read_log
from effectbench.outputs.manifest import task_entry
from effectbench.outputs.rows import LINE_OPTS, record_row
from effectbench.projections.metrics import MetricsAccumulator, PlanIndex

__all__ = ["LogPass", "PlanFacts", "RunFacts", "Spill", "sequential_pass", "write_atomic"]

_COPY_CHUNK: Final = 1 << 22


# --------------------------------------------------------------------------- the log pass


@attrs.frozen
class PlanFacts:
    """What the artifacts need from the plan, kept instead of the (possibly large) plan."""

    index: PlanIndex
    provider: Mapping[str, Any]
    pack_fingerprint: Any
    task_globs: list[Any]
    versions: Mapping[str, Any]
    tasks: list[dict[str, Any]]
    fixture: bool = False
    """The provider declared a deterministic fixture (the plan's ``fixture``)."""
    limit: int | None = None
    """The run's ``--limit`` (the plan's ``limit``), None when it had none."""

    def selection(self) -> dict[str, Any]:
        """How the tasks were chosen, as the manifest records it: ``task_globs``, and
        ``limit`` only when given (so a manifest without one keeps its bytes)."""
        return {
            "task_globs": self.task_globs,
            **({} if self.limit is None else {"limit": self.limit}),
        }

    @classmethod
    def of(cls, plan: Mapping[str, Any]) -> PlanFacts:
        return cls(
            index=PlanIndex.from_plan(plan),
            provider=dict(plan.get("provider") or {}),
            pack_fingerprint=plan.get("pack_fingerprint"),
            task_globs=list(plan.get("task_globs") or []),
            versions=dict(plan.get("versions") or {}),
            tasks=[task_entry(t) for t in plan.get("tasks", ())],
            fixture=plan.get("fixture") is True,
            limit=plan["limit"] if type(plan.get("limit")) is int else None,
        )


@attrs.define
class RunFacts:
    """Run-level events seen while streaming (everything else goes to the projection)."""

    started: Mapping[str, Any] | None = None
    plan: PlanFacts | None = None
    resumes: list[dict[str, Any]] = attrs.field(factory=list)
    finished: Mapping[str, Any] | None = None
    finished_seq: int = -1
    """seq of the last run.finished: the log ends with its run only if it is the last event."""
    cited: dict[tuple[str, str], int] = attrs.field(factory=dict)
    """Every evidence blob an episode.screenshot cites, as (sha256, path), with the seq of
    its first citation: what a rescore checks against the files (effectbench.core.evidence)."""

    def tap(self, events: Iterator[LoggedEvent]) -> Iterator[LoggedEvent]:
        shot = ArmScreenshot.TYPE
        for ev in events:
            if ev.ep is None:
                self.see(ev)
            elif self.started is None:
                self.too_early(ev)
            elif ev.type == shot:
                self.cite(ev.seq, ev.data)
            yield ev

    def cite(self, seq: int, data: Mapping[str, Any]) -> None:
        """Note the blob an episode.screenshot event (``data``) cites."""
        key = (str(data.get("sha256")), str(data.get("path")))
        if key not in self.cited:
            self.cited[key] = seq

    def see(self, ev: LoggedEvent) -> None:
        """Take one run-level event (``ep`` is None), as tap does."""
        t = ev.type
        if t == RunStarted.TYPE:
            if self.started is None:
                self._start(ev.data)
        elif t == RunResumed.TYPE:
            self._resumed(ev)
        elif t == RunFinished.TYPE:
            self.finished = ev.data
            self.finished_seq = ev.seq

    def too_early(self, ev: LoggedEvent) -> NoReturn:
        raise ArtifactError(
            f"{LOG_FILE}: event #{ev.seq} comes before run.started; the log does not start "
            "with its plan, so it cannot be scored"
        )

    def _resumed(self, ev: LoggedEvent) -> None:
        self.resumes.append(
            {
                "seq": ev.seq,
                "kept": ev.data.get("kept"),
                "abandoned": ev.data.get("abandoned"),
                "concurrency": ev.data.get("concurrency"),
                "execution": ev.data.get("execution"),
                "containment": ev.data.get("containment"),
                "min_coverage": ev.data.get("min_coverage"),
            }
        )

    def _start(self, data: Mapping[str, Any]) -> None:
        plan = data.get("plan")
        if not isinstance(plan, Mapping):
            raise ArtifactError(f"{LOG_FILE}: run.started carries no plan; it is not a run log")
        self.started = {k: v for k, v in data.items() if k != "plan"}
        self.plan = PlanFacts.of(plan)

    def plan_facts(self) -> PlanFacts:
        if self.plan is None:
            raise ArtifactError(
                f"{LOG_FILE} has no run.started event with a plan; it is not a run log"
            )
        return self.plan


class Spill:
    """Rows written as they complete, read back in plan order through offsets."""

    def __init__(self, run_dir: Path, n_slots: int, file: Any = None) -> None:
        self.file = (
            tempfile.TemporaryFile(dir=run_dir, prefix=".results-", suffix=".spill")  # noqa: SIM115
            if file is None
            else file
        )
        self.offsets = array("q", [-1]) * n_slots
        self.lengths = array("l", [0]) * n_slots
        self.pos = 0
        # A sharded rescore merges other workers' spill files in: ``source[slot]`` names
        # the file (index into ``sources``; 0 is this one) that holds the slot's row.
        self.sources: list[Any] = [self.file]
        self.source: bytearray | None = None

    def put(self, slot: int, line: bytes) -> None:
        self.file.write(line)
        self.offsets[slot] = self.pos
        self.lengths[slot] = len(line)
        self.pos += len(line)

    def write_ordered(self, out: Any) -> None:
        """Copy rows out in slot order; adjacent rows are read as one range (pread, so no
        mapped pages count against memory)."""
        self.file.flush()
        if self.source is not None:
            self._write_merged(out, self.source)
            return
        fd = self.file.fileno()
        start = end = 0
        lengths = self.lengths
        for slot, off in enumerate(self.offsets):
            if off < 0:
                continue
            if off != end or end - start >= _COPY_CHUNK:
                if end > start:
                    out.write(os.pread(fd, end - start, start))
                start = off
                end = off
            end += lengths[slot]
        if end > start:
            out.write(os.pread(fd, end - start, start))

    def _write_merged(self, out: Any, source: bytearray) -> None:
        fds = [f.fileno() for f in self.sources]
        start = end = 0
        cur = 0
        lengths = self.lengths
        for slot, off in enumerate(self.offsets):
            if off < 0:
                continue
            src = source[slot]
            if off != end or src != cur or end - start >= _COPY_CHUNK:
                if end > start:
                    out.write(os.pread(fds[cur], end - start, start))
                start = end = off
                cur = src
            end += lengths[slot]
        if end > start:
            out.write(os.pread(fds[cur], end - start, start))

    def close(self) -> None:
        for file in self.sources:  # this one, and those a sharded pass merged in
            file.close()


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@attrs.define
class LogPass:
    """What one pass over the log leaves for the artifacts (sequential or sharded)."""

    facts: RunFacts
    acc: MetricsAccumulator | None
    spill: Spill | None
    count: int
    last_hash: str
    torn_tail: bool
    episodes: int


def sequential_pass(log_path: Path, root: Path, verify_chain: bool) -> LogPass:
    from effectbench.projections.episodes import project_episodes

    reader = read_log(log_path, verify=verify_chain)
    facts = RunFacts()
    acc: MetricsAccumulator | None = None
    spill: Spill | None = None
    dumps = orjson.dumps
    episodes = 0
    try:
        for rec in project_episodes(facts.tap(iter(reader))):
            if acc is None:
                acc = MetricsAccumulator(facts.plan_facts().index)
                spill = Spill(root, len(acc.plan))
            slot = acc.add(rec)
            assert spill is not None
            spill.put(slot, dumps(record_row(rec), option=LINE_OPTS))
            episodes += 1
    except BaseException:
        if spill is not None:
            spill.close()
        raise
    return LogPass(facts, acc, spill, reader.count, reader.last_hash, reader.torn_tail, episodes)
