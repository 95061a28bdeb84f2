"""The plan of a run: which episodes exist, and the hash that says two runs are the same.

A plan is everything that defines the episode set and how it is scored (provider,
task pack, arms, trials, versions), and nothing about *how* it is executed
(concurrency, output directory, timeouts). Its hash guards resume: a log is only
continued by a plan with the same hash, so no episode is ever scored under two
different definitions.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from effectbench.core import versions
from effectbench.core.errors import EffectBenchError
from effectbench.core.hashing import content_hash
from effectbench.core.model import AnyEffect, TaskSpec, canonical_json, trial_params

PLAN_SCHEMA = versions.PLAN_SCHEMA
"""Major 2 added ``arm_versions`` to the identity: an arm upgraded between a kill and a
resume is a different plan."""

IDENTITY_KEYS: Final = (
    "schema",
    "provider",
    "pack_fingerprint",
    "task_ids",
    "arms",
    "arm_versions",
    "trials",
    "versions",
)
"""The plan fields its hash covers (everything that defines the episodes and their scoring)."""


def hash_identity(plan: Mapping[str, Any]) -> str:
    """The plan hash of a plan's JSON (as ``run.started`` records it): one definition for the
    scheduler, resume and the verifier."""
    return hashlib.sha256(canonical_json({k: plan.get(k) for k in IDENTITY_KEYS})).hexdigest()


MAX_EPISODES = 10_000_000
"""More is a typo (or needs splitting with --task). Episodes are generated lazily, so the
cap guards against a slip of the keyboard, not against memory."""

RESOLVE_CACHE_MAX = 4096
"""(task, trial) pairs whose params and resolved effect are kept for the next arm. Bounded,
so planning costs the same memory for 10k episodes as for 10M; beyond it, a pair is
resolved again for each arm (a few microseconds)."""


class PlanError(EffectBenchError, ValueError):
    """A run that cannot be planned (no tasks selected, bad trial count); one line for the CLI."""


@attrs.frozen
class ProviderInfo:
    name: str
    version: str
    distribution: str | None = None


def default_versions() -> dict[str, str]:
    """The versions a result depends on: package, spec, scoring and event schema."""
    return {
        "package": versions.PACKAGE_VERSION,
        "spec": versions.SPEC_VERSION,
        "scoring": versions.SCORING_VERSION,
        "events_schema": versions.EVENTS_SCHEMA_ID,
    }


def _task_public(task: TaskSpec) -> dict[str, Any]:
    from effectbench.core.codec import converter

    data: dict[str, Any] = converter.unstructure(task)
    data["effect_hash"] = content_hash(task.expected_effect)
    return data


def pack_fingerprint(tasks: Sequence[TaskSpec]) -> str:
    """sha256 over every task's fields and effect hash, in plan order."""
    return hashlib.sha256(canonical_json([_task_public(t) for t in tasks])).hexdigest()


def _sorted_map(m: Mapping[str, str]) -> dict[str, str]:
    return dict(sorted(m.items()))


def _sorted_versions(m: Mapping[str, str | None]) -> dict[str, str | None]:
    return dict(sorted(m.items()))


def _str_tuple(v: Iterable[str]) -> tuple[str, ...]:
    return tuple(v)


def _task_tuple(v: Iterable[TaskSpec]) -> tuple[TaskSpec, ...]:
    return tuple(v)


@attrs.frozen
class Plan:
    provider: ProviderInfo
    pack_fingerprint: str
    tasks: tuple[TaskSpec, ...] = attrs.field(converter=_task_tuple)
    arms: tuple[str, ...] = attrs.field(converter=_str_tuple)
    trials: int
    task_globs: tuple[str, ...] = attrs.field(converter=_str_tuple)
    versions: Mapping[str, str] = attrs.field(converter=_sorted_map)
    arm_versions: Mapping[str, str | None] = attrs.field(factory=dict, converter=_sorted_versions)
    """Arm name -> the version of the code behind it ("dist==version", the arm's own
    ``version`` attribute, or None when neither is known)."""
    refs: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
    """How the provider and arms were named (entry point or module:attribute), so a resume
    can load the same plugins; recorded, never hashed."""
    fixture: bool = attrs.field(default=False, eq=False)
    """The provider declares its pack a deterministic, hand-built fixture (``fixture =
    True``): summary.md then calls its figures fixture invariants. Recorded, never hashed."""
    limit: int | None = None
    """``--limit N``: the plan holds the first N tasks the globs select, in pack order.
    Recorded (a resume keeps it) but not hashed: the task ids it selected are."""

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks)

    @property
    def n_episodes(self) -> int:
        return len(self.arms) * len(self.tasks) * self.trials

    def identity(self) -> dict[str, Any]:
        """What the hash covers: the episode set and scoring, never execution knobs."""
        return {
            "schema": PLAN_SCHEMA,
            "provider": attrs.asdict(self.provider),
            "pack_fingerprint": self.pack_fingerprint,
            "task_ids": list(self.task_ids),
            "arms": list(self.arms),
            "arm_versions": dict(self.arm_versions),
            "trials": self.trials,
            "versions": dict(self.versions),
        }

    @property
    def plan_hash(self) -> str:
        return hash_identity(self.identity())

    def to_json(self) -> dict[str, Any]:
        """The plan as written into ``run.started``: identity plus the full tasks."""
        from effectbench.core.codec import converter

        data = self.identity()
        data["task_globs"] = list(self.task_globs)
        data["refs"] = dict(self.refs)
        if self.fixture:  # only then, so other logs keep their bytes
            data["fixture"] = True
        if self.limit is not None:  # likewise
            data["limit"] = self.limit
        data["tasks"] = [converter.unstructure(t) for t in self.tasks]
        return data


def select_tasks(tasks: Sequence[TaskSpec], globs: Sequence[str]) -> tuple[TaskSpec, ...]:
    """Tasks whose id matches any glob (all when none given), in provider order (the
    order ``--limit`` cuts).

    A glob that selects nothing is an error, so a typo never silently shrinks a run.
    """
    if not globs:
        return tuple(tasks)
    for pattern in globs:
        if not any(fnmatch.fnmatchcase(t.task_id, pattern) for t in tasks):
            ids = ", ".join(t.task_id for t in tasks[:8]) + (", ..." if len(tasks) > 8 else "")
            raise PlanError(f"--task {pattern!r} selects no task; task ids look like: {ids}")
    return tuple(t for t in tasks if any(fnmatch.fnmatchcase(t.task_id, p) for p in globs))


def build_plan(
    provider: ProviderInfo,
    tasks: Sequence[TaskSpec],
    arms: Sequence[str],
    trials: int,
    task_globs: Sequence[str] = (),
    versions: Mapping[str, str] | None = None,
    refs: Mapping[str, Any] | None = None,
    arm_versions: Mapping[str, str | None] | None = None,
    fixture: bool = False,
    limit: int | None = None,
) -> Plan:
    if trials < 1:
        raise PlanError(f"--trials must be a positive integer, got {trials}")
    if not arms:
        raise PlanError("no arm given: name at least one with --arm")
    if len(set(arms)) != len(arms):
        raise PlanError(f"an arm is named twice: {', '.join(arms)}")
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise PlanError(f"--limit must be a positive integer, got {limit}")
    selected = select_tasks(tasks, task_globs)[:limit]
    if not selected:
        raise PlanError(f"provider {provider.name!r} offers no tasks")
    ids = [t.task_id for t in selected]
    if len(set(ids)) != len(ids):
        raise PlanError(f"provider {provider.name!r} lists a task id twice")
    if len(arms) * len(selected) * trials > MAX_EPISODES:
        raise PlanError(
            f"{len(arms)} arm(s) x {len(selected)} task(s) x {trials} trials is more than "
            f"{MAX_EPISODES:,} episodes; lower --trials or select fewer tasks with --task"
        )
    return Plan(
        provider=provider,
        pack_fingerprint=pack_fingerprint(selected),
        tasks=selected,
        arms=tuple(arms),
        trials=trials,
        task_globs=tuple(task_globs),
        versions=default_versions() if versions is None else versions,
        arm_versions={} if arm_versions is None else arm_versions,
        refs={} if refs is None else refs,
        fixture=fixture,
        limit=limit,
    )


@attrs.frozen
class EpisodeSpec:
    """One planned episode: (arm, task, trial) with this trial's params and resolved effect."""

    episode_id: str
    index: int
    arm: str
    task: TaskSpec
    trial: int
    params: Mapping[str, str]
    effect: AnyEffect


def episode_id(arm: str, task_id: str, trial: int) -> str:
    return f"{arm}::{task_id}::t{trial}"


def episodes(plan: Plan) -> Iterator[EpisodeSpec]:
    """Every episode in the one deterministic order: for arm, for task, for trial.

    Lazy: a run holds only the episodes in flight, never the plan's millions."""
    resolved: dict[tuple[str, int], tuple[dict[str, str], AnyEffect]] = {}
    index = 0
    for arm in plan.arms:
        for task in plan.tasks:
            for trial in range(plan.trials):
                key = (task.task_id, trial)
                hit = resolved.get(key)
                if hit is None:
                    params = trial_params(task, trial)
                    hit = (params, task.expected_effect.resolve(params))
                    if len(resolved) < RESOLVE_CACHE_MAX:
                        resolved[key] = hit
                params, effect = hit
                yield EpisodeSpec(
                    episode_id(arm, task.task_id, trial), index, arm, task, trial, params, effect
                )
                index += 1


def count_planned(plan: Plan, ids: Iterable[str]) -> int:
    """How many of ``ids`` are episodes of ``plan``, without listing the plan's episodes
    (a resume's already-done count for a plan of millions)."""
    task_ids = frozenset(plan.task_ids)
    prefixes = [(arm + "::", len(arm) + 2) for arm in plan.arms]

    def planned(ep: str) -> bool:
        head, sep, trial = ep.rpartition("::t")
        if not sep or not trial.isdigit() or str(int(trial)) != trial or int(trial) >= plan.trials:
            return False
        return any(head.startswith(p) and head[n:] in task_ids for p, n in prefixes)

    return sum(1 for ep in ids if planned(ep))


def diff_plans(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between two plan identities, one phrase each, for the resume refusal."""
    out: list[str] = []
    a_prov, b_prov = recorded.get("provider") or {}, current.get("provider") or {}
    for key in ("name", "version", "distribution"):
        if a_prov.get(key) != b_prov.get(key):
            out.append(f"provider {key}: recorded {a_prov.get(key)!r}, now {b_prov.get(key)!r}")
    a_ids, b_ids = list(recorded.get("task_ids") or []), list(current.get("task_ids") or [])
    if a_ids != b_ids:
        gone = [t for t in a_ids if t not in b_ids]
        new = [t for t in b_ids if t not in a_ids]
        parts = []
        if gone:
            parts.append(f"missing now: {_short(gone)}")
        if new:
            parts.append(f"new: {_short(new)}")
        if not parts:
            parts.append("same ids in a different order")
        out.append("tasks: " + "; ".join(parts))
    elif recorded.get("pack_fingerprint") != current.get("pack_fingerprint"):
        out.append("tasks: same ids but their definitions changed (pack fingerprint differs)")
    if list(recorded.get("arms") or []) != list(current.get("arms") or []):
        out.append(
            f"arms: recorded {', '.join(recorded.get('arms') or [])}, now "
            f"{', '.join(current.get('arms') or [])}"
        )
    a_av, b_av = recorded.get("arm_versions") or {}, current.get("arm_versions") or {}
    for name in sorted(set(a_av) | set(b_av)):
        if a_av.get(name) != b_av.get(name):
            out.append(f"arm {name} version: recorded {a_av.get(name)!r}, now {b_av.get(name)!r}")
    if recorded.get("trials") != current.get("trials"):
        out.append(f"trials: recorded {recorded.get('trials')}, now {current.get('trials')}")
    a_ver, b_ver = recorded.get("versions") or {}, current.get("versions") or {}
    for key in sorted(set(a_ver) | set(b_ver)):
        if a_ver.get(key) != b_ver.get(key):
            out.append(f"{key} version: recorded {a_ver.get(key)!r}, now {b_ver.get(key)!r}")
    if not out and recorded.get("schema") != current.get("schema"):
        out.append(
            f"plan schema: recorded {recorded.get('schema')!r}, now {current.get('schema')!r}"
        )
    return out


def _short(items: list[str]) -> str:
    return ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")


__all__ = [
    "EpisodeSpec",
    "Plan",
    "PlanError",
    "ProviderInfo",
    "build_plan",
    "count_planned",
    "default_versions",
    "diff_plans",
    "episode_id",
    "episodes",
    "pack_fingerprint",
    "select_tasks",
]
