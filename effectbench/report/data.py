"""What a report shows, extracted from a run directory's artifacts (and nothing else).

metrics.json gives every rate (the report never recomputes one, so the page and the
file cannot disagree), manifest.json the run's identity, results.jsonl the per-task
and per-episode rows. The log is read only for the episodes that get a drill-down
(effectbench.report.drill). Everything is ordered by the plan, never by a set or the
clock, so the same artifacts always give the same report.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.core.rundir import LOG_FILE, MANIFEST_FILE, METRICS_FILE, RESULTS_FILE
from effectbench.report.errors import ReportError
from effectbench.report.sample import DRILL_LIMIT, EpisodeRef, EpisodeSample, EpisodeSampler

__all__ = [
    "OUTCOME_COLUMNS",
    "ArmView",
    "Cell",
    "EpisodeRef",
    "Identity",
    "Rate",
    "ReportError",
    "RunData",
    "TaskArm",
    "TaskRow",
    "Telemetry",
    "episode_label",
    "load_run",
    "read_json",
]

# The old names of the run's files here, kept for importers (core.rundir names them).
MANIFEST: Final = MANIFEST_FILE
METRICS: Final = METRICS_FILE
RESULTS: Final = RESULTS_FILE
LOG: Final = LOG_FILE
TASK_LIMIT: Final = 1000
"""Tasks listed in the per-task table; beyond it the page says how many are left out."""

OUTCOME_COLUMNS: Final = (
    ("success", "success"),
    ("swer_wrong_write", "SWER wrong write"),
    ("swer_phantom", "SWER phantom"),
    ("false_abort", "false abort"),
    ("wrong_action", "wrong action"),
    ("over_halt", "over-halt"),
    ("safe_halt", "safe halt"),
    ("failed", "failed"),
)
"""(key, header) of the per-task outcome counts, in the order the tables show them."""


def read_json(path: Path) -> dict[str, Any]:
    """One artifact as a dict, or a ReportError that says how to get it back."""
    try:
        value = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ReportError(
            f"{path} is missing; rebuild the artifacts with `effectbench rescore {path.parent}`"
        ) from None
    except orjson.JSONDecodeError as exc:
        raise ReportError(
            f"{path} is not JSON ({exc}); rebuild it with `effectbench rescore {path.parent}`"
        ) from None
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(value, dict):
        raise ReportError(f"{path} is not a JSON object; rebuild it with `effectbench rescore`")
    return value


# --------------------------------------------------------------------------- values


@attrs.frozen
class Rate:
    """numerator/denominator with its 95% interval, as metrics.json states it."""

    numerator: int
    denominator: int
    value: float | None
    lo: float | None
    hi: float | None

    @classmethod
    def of(cls, block: Mapping[str, Any] | None) -> Rate:
        block = block or {}
        ci = block.get("ci95")
        value = block.get("rate", block.get("value"))
        num = block.get("numerator", block.get("successes", 0))
        den = block.get("denominator", block.get("eligible_tasks", 0))
        return cls(
            int(num or 0),
            int(den or 0),
            None if value is None else float(value),
            None if ci is None else float(ci[0]),
            None if ci is None else float(ci[1]),
        )


@attrs.frozen
class Gap:
    """Screen success minus task success over the same eligible episodes (paired)."""

    value: float | None
    lo: float | None
    hi: float | None
    screen: int
    task: int
    denominator: int

    @classmethod
    def of(cls, block: Mapping[str, Any] | None) -> Gap:
        block = block or {}
        ci = block.get("ci95")
        return cls(
            block.get("value"),
            None if ci is None else float(ci[0]),
            None if ci is None else float(ci[1]),
            int(block.get("screen_success") or 0),
            int(block.get("task_success") or 0),
            int(block.get("denominator") or 0),
        )


@attrs.frozen
class Telemetry:
    """Eligible-episode telemetry; None is "no source" (the arm reported nothing), never 0."""

    wall_p50: float | None
    wall_p95: float | None
    model_calls_mean: float | None
    tokens_mean: float | None
    cost_usd: float | None
    cost_with_source: int
    setup_p50: float | None

    @classmethod
    def of(cls, block: Mapping[str, Any] | None) -> Telemetry:
        t = block or {}

        def get(name: str, key: str) -> float | None:
            v = (t.get(name) or {}).get(key)
            return None if v is None else float(v)

        cost = t.get("cost") or {}
        usd = cost.get("eligible_usd")
        return cls(
            get("wall_ms", "p50"),
            get("wall_ms", "p95"),
            get("model_calls", "mean"),
            get("total_tokens", "mean"),
            None if usd is None else float(usd),
            int(cost.get("eligible_with_source") or 0),
            get("setup_ms", "p50"),
        )


@attrs.frozen
class Cell:
    """One (category x substrate) cell of one arm."""

    category: str
    substrate: str
    tasks: int
    n_episodes: int
    n_eligible: int
    swer: Rate
    over_halt: Rate
    task_success: Rate
    screen_success: Rate
    gap: Gap


@attrs.frozen
class ArmView:
    """One arm's headline, coverage, failures, repeated-trial metrics and telemetry."""

    name: str
    n_episodes: int
    n_eligible: int
    coverage: float | None
    swer: Rate
    swer_wrong_write: Rate
    swer_phantom: Rate
    over_halt: Rate
    task_success: Rate
    screen_success: Rate
    gap: Gap
    outcome_counts: Mapping[str, int]
    failure_counts: Mapping[str, int]
    not_run: int
    pass_at_1: Rate
    pass_at_k: Rate
    pass_pow_k: Rate
    cells: tuple[Cell, ...]
    telemetry: Telemetry

    @classmethod
    def of(cls, name: str, a: Mapping[str, Any]) -> ArmView:
        return cls(
            name=name,
            n_episodes=int(a.get("n_episodes") or 0),
            n_eligible=int(a.get("n_eligible") or 0),
            coverage=a.get("coverage"),
            swer=Rate.of(a.get("swer")),
            swer_wrong_write=Rate.of(a.get("swer_wrong_write")),
            swer_phantom=Rate.of(a.get("swer_phantom")),
            over_halt=Rate.of(a.get("over_halt")),
            task_success=Rate.of(a.get("task_success")),
            screen_success=Rate.of(a.get("screen_success")),
            gap=Gap.of(a.get("gap")),
            outcome_counts=dict(a.get("outcome_counts") or {}),
            failure_counts=dict(a.get("failure_counts") or {}),
            not_run=int(a.get("not_run") or 0),
            pass_at_1=Rate.of(a.get("pass_at_1")),
            pass_at_k=Rate.of(a.get("pass_at_k")),
            pass_pow_k=Rate.of(a.get("pass_pow_k")),
            cells=tuple(_cell(c) for c in a.get("cells") or ()),
            telemetry=Telemetry.of(a.get("telemetry")),
        )


def _cell(c: Mapping[str, Any]) -> Cell:
    return Cell(
        category=str(c.get("category")),
        substrate=str(c.get("substrate")),
        tasks=int(c.get("tasks") or 0),
        n_episodes=int(c.get("n_episodes") or 0),
        n_eligible=int(c.get("n_eligible") or 0),
        swer=Rate.of(c.get("swer")),
        over_halt=Rate.of(c.get("over_halt")),
        task_success=Rate.of(c.get("task_success")),
        screen_success=Rate.of(c.get("screen_success")),
        gap=Gap.of(c.get("gap")),
    )


@attrs.frozen
class TaskArm:
    """One arm's episodes of one task: outcome counts and the task's own pass@k / pass^k.

    ``pass_at_k`` / ``pass_pow_k`` are None when the task's first k planned attempts are
    not all eligible: it is not covered, which is not a failure."""

    counts: tuple[int, ...]
    eligible: int
    planned: int
    pass_at_k: bool | None
    pass_pow_k: bool | None


@attrs.frozen
class TaskRow:
    task_id: str
    category: str
    substrate: str
    arms: tuple[TaskArm, ...]


@attrs.frozen
class Identity:
    """What makes the run this run: hashes, versions and the plan's shape."""

    run_id: str | None
    provider: str
    plan_hash: str | None
    pack_fingerprint: str | None
    final_hash: str | None
    events: int | None
    torn_tail: bool
    versions: Mapping[str, Any]
    recorded_versions: Mapping[str, Any]
    arm_versions: Mapping[str, Any]
    trials: int
    k: int
    tasks: int
    planned: int
    z: float | None
    interrupted: bool | None
    provider_name: str = ""
    fixture: bool = False
    """The provider declares its pack a deterministic fixture (summary.md's warning)."""


@attrs.frozen
class RunData:
    """Everything a report shows except the drill-downs (which need the log)."""

    run_dir: Path
    identity: Identity
    arms: tuple[ArmView, ...]
    tasks: tuple[TaskRow, ...]
    tasks_total: int
    episodes: EpisodeSample
    """The episodes a drill-down can be chosen from (bounded: report.sample)."""
    comparisons: tuple[Mapping[str, Any], ...]
    codes: Mapping[tuple[str, str, int], str]
    """(arm, task, trial) -> episode label, for paired comparisons across runs (empty
    unless asked for: one entry per episode)."""


# --------------------------------------------------------------------------- extraction


def episode_label(row: Mapping[str, Any]) -> str:
    """The one word a row is filed under: its outcome (SWER split by variant) or failure."""
    outcome = row.get("outcome")
    if not row.get("eligible") or outcome is None:
        return f"failed: {row.get('failure_class') or 'unknown'}"
    if outcome == "SILENT_WRONG_EFFECT":
        return "SWER phantom" if row.get("swer_variant") == "phantom" else "SWER wrong write"
    return {
        "SUCCESS": "success",
        "FALSE_ABORT": "false abort",
        "WRONG_ACTION": "wrong action",
        "OVER_HALT": "over-halt",
        "SAFE_HALT": "safe halt",
    }.get(str(outcome), str(outcome))


_COLUMN_OF: Final = {header: i for i, (_, header) in enumerate(OUTCOME_COLUMNS)}


def iter_results(path: Path) -> Iterator[dict[str, Any]]:
    """results.jsonl rows in file (= plan) order."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; a generator keeps it open
    except FileNotFoundError:
        raise ReportError(
            f"{path} is missing; rebuild the artifacts with `effectbench rescore {path.parent}`"
        ) from None
    with f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise ReportError(
                    f"{path} line {line_no} is not JSON; rebuild it with "
                    f"`effectbench rescore {path.parent}`"
                ) from None
            yield row


def _identity(manifest: Mapping[str, Any], metrics: Mapping[str, Any]) -> Identity:
    log = manifest.get("log") or {}
    prov = manifest.get("provider") or {}
    provider = f"{prov.get('name')} {prov.get('version')}"
    if prov.get("distribution"):
        provider += f" ({prov['distribution']})"
    finished = manifest.get("run_finished")
    rv = dict(manifest.get("recorded_versions") or {})
    return Identity(
        run_id=manifest.get("run_id"),
        provider=provider,
        plan_hash=manifest.get("plan_hash"),
        pack_fingerprint=manifest.get("pack_fingerprint"),
        final_hash=log.get("final_hash"),
        events=log.get("events"),
        torn_tail=bool(log.get("torn_tail")),
        versions=dict(manifest.get("versions") or {}),
        recorded_versions=rv,
        arm_versions={},
        trials=int(manifest.get("trials") or 0),
        k=int(metrics.get("k") or manifest.get("k") or 0),
        tasks=len(manifest.get("tasks") or ()),
        planned=int((manifest.get("episodes") or {}).get("planned") or 0),
        z=metrics.get("z"),
        interrupted=None if not isinstance(finished, Mapping) else finished.get("interrupted"),
        provider_name=str(prov.get("name")),
        fixture=manifest.get("fixture") is True,
    )


class _TaskTally:
    """Per (arm, task): outcome counts and the planned attempts' success flags."""

    def __init__(self, trials: int) -> None:
        self.trials = trials
        self.counts = [0] * len(OUTCOME_COLUMNS)
        self.attempts: list[bool | None] = [None] * trials

    def add(self, trial: int, label: str) -> None:
        column = _COLUMN_OF.get(label, _COLUMN_OF["failed"])
        self.counts[column] += 1
        if 0 <= trial < self.trials and column != _COLUMN_OF["failed"]:
            self.attempts[trial] = label == "success"

    def view(self, k: int) -> TaskArm:
        eligible = sum(1 for a in self.attempts if a is not None)
        head = self.attempts[:k]
        covered = k > 0 and len(head) == k and all(a is not None for a in head)
        return TaskArm(
            counts=tuple(self.counts),
            eligible=eligible,
            planned=self.trials,
            pass_at_k=any(head) if covered else None,
            pass_pow_k=all(head) if covered else None,
        )


def load_run(
    run_dir: str | Path,
    *,
    drill_limit: int = DRILL_LIMIT,
    wanted: Iterable[str] = (),
    codes: bool = True,
) -> RunData:
    """Read a run directory's artifacts into the report's model (the log is not read).

    Memory stays flat in the run's size: episodes are kept only as the drill-down
    sample for ``drill_limit`` and the ``wanted`` ids, and the per-episode labels of
    ``codes`` (for comparing runs) only when asked for."""
    root = Path(run_dir)
    if not root.is_dir():
        raise ReportError(f"run directory {root} does not exist")
    manifest = read_json(root / MANIFEST)
    metrics = read_json(root / METRICS)
    identity = _identity(manifest, metrics)
    arm_order = list(metrics.get("arm_order") or metrics.get("arms") or ())
    arms = tuple(ArmView.of(a, (metrics.get("arms") or {}).get(a) or {}) for a in arm_order)
    task_entries = [t for t in manifest.get("tasks") or () if isinstance(t, Mapping)]
    tallies: dict[tuple[str, str], _TaskTally] = {}
    sampler = EpisodeSampler(drill_limit, frozenset(wanted))
    labels: dict[tuple[str, str, int], str] = {}
    for slot, row in enumerate(iter_results(root / RESULTS)):
        label = episode_label(row)
        arm, task_id, trial = str(row.get("arm")), str(row.get("task_id")), int(row["trial"])
        key = (arm, task_id)
        tally = tallies.get(key)
        if tally is None:
            tally = tallies[key] = _TaskTally(identity.trials)
        tally.add(trial, label)
        sampler.add(EpisodeRef(slot, str(row.get("episode_id")), arm, task_id, trial, label))
        if codes:
            labels[(arm, task_id, trial)] = label
    tasks = tuple(
        TaskRow(
            task_id=str(t.get("task_id")),
            category=str(t.get("category")),
            substrate=str(t.get("substrate")),
            arms=tuple(
                (tallies.get((a, str(t.get("task_id")))) or _TaskTally(identity.trials)).view(
                    identity.k
                )
                for a in arm_order
            ),
        )
        for t in task_entries[:TASK_LIMIT]
    )
    return RunData(
        run_dir=root,
        identity=attrs.evolve(identity, arm_versions=_arm_versions(root, manifest)),
        arms=arms,
        tasks=tasks,
        tasks_total=len(task_entries),
        episodes=sampler.sample(),
        comparisons=tuple(metrics.get("comparisons") or ()),
        codes=labels,
    )


def _arm_versions(root: Path, manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """The arms' code versions. The manifest does not repeat them; the plan in
    run.started (the log's first line) holds them."""
    arms: Sequence[str] = manifest.get("arms") or ()
    try:
        with open(root / LOG, "rb") as f:
            first = f.readline()
        data = orjson.loads(first[: first.rfind(b',"h":"')] + b"}").get("data") or {}
        versions = (data.get("plan") or {}).get("arm_versions") or {}
    except (OSError, orjson.JSONDecodeError, AttributeError):
        versions = {}  # unknown, shown as such
    return {a: versions.get(a) for a in arms}
