"""What one episode's events carry, worked out from what its arm and provider returned.

Pure helpers of the episode's stages (run/episode.py): the planned event (its resolved
effect unstructured and hashed once per task and trial), telemetry sums that are null
rather than partial, numbers out of range, an arm's report against its log budget,
action details made JSON-safe, screenshots stored by content hash. ``typed`` is the only
way an event becomes a line (the architecture test holds the runner to it).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.core import bounds
from effectbench.core.agentlog import LogBudget, LogBudgetExceeded
from effectbench.core.codec import converter
from effectbench.core.errors import one_line
from effectbench.core.events import EpisodePlanned, event_data
from effectbench.core.model import AgentReport, Snapshot
from effectbench.core.provider import ActionRecord, ModelCall, ProvisionedEpisode
from effectbench.run.plan import RESOLVE_CACHE_MAX, EpisodeSpec

ARM_REASON_MAX: Final = 5_120
"""An arm's failure reason may be longer than other errors: a protocol agent's carries
the last 4 KiB of its stderr (the real error, not only its last line)."""


@attrs.define
class PlannedEvents:
    """The episode.planned event of a spec; every arm of a (task, trial) shares one
    resolved effect, unstructured and hashed once (a bounded cache: memory flat in the
    plan's size). One per run, shared by its runner and its executor's sink."""

    _effects: dict[tuple[str, int], tuple[dict[str, Any], str]] = attrs.Factory(dict)

    def of(self, spec: EpisodeSpec) -> EpisodePlanned:
        task = spec.task
        key = (task.task_id, spec.trial)
        cached = self._effects.get(key)
        if cached is None:  # every arm of a (task, trial) shares one resolved effect
            effect = converter.unstructure(spec.effect)
            # the same bytes hashing.content_hash(effect) hashes, without unstructuring twice
            digest = hashlib.sha256(orjson.dumps(effect, option=orjson.OPT_SORT_KEYS)).hexdigest()
            cached = (effect, digest)
            if len(self._effects) < RESOLVE_CACHE_MAX:  # bounded: memory flat in the plan size
                self._effects[key] = cached
        effect, digest = cached
        return EpisodePlanned(
            arm=spec.arm,
            task_id=task.task_id,
            trial=spec.trial,
            params=dict(spec.params),
            category=task.category.value,
            substrate=task.substrate.value,
            split=task.split.value,
            reversible=task.reversible,
            effect_declared=task.effect_declared,
            correct_action_available=task.correct_action_available,
            effect=effect,
            effect_hash=digest,
        )

    def data(self, spec: EpisodeSpec) -> dict[str, Any]:
        """The planned event's data, as an executor writes it for an episode run elsewhere."""
        return event_data(self.of(spec))


def snapshot_data(snapshot: Snapshot) -> dict[str, Any]:
    data: dict[str, Any] = converter.unstructure(snapshot)
    return data


def sum_known(values: Iterable[float | int | None]) -> Any:
    """Sum when every value is known; None when any is missing (never a partial zero)."""
    total: float | int = 0
    any_value = False
    for v in values:
        if v is None:
            return None
        total += v
        any_value = True
    return total if any_value else None


def bounded_calls(calls: Sequence[ModelCall]) -> tuple[list[ModelCall], str | None]:
    """The calls whose numbers are in range (core/bounds.py) and the first problem of
    one that is not: an arm that reports such a number fails its episode."""
    kept: list[ModelCall] = []
    problem: str | None = None
    for c in calls:
        why = bounds.call_problem(c.input_tokens, c.output_tokens, c.cost_usd, c.latency_ms)
        if why is None:
            kept.append(c)
        elif problem is None:
            problem = why
    return kept, problem


def over_budget(budget: LogBudget, report: AgentReport) -> str | None:
    """Charge the report's message to the episode's log budget; why the episode is past
    its budget (also when the arm caught the recorder's refusal), else None."""
    if budget.exceeded is None:
        with contextlib.suppress(LogBudgetExceeded):
            budget.charge(len(str(report.message).encode("utf-8", "replace")), "its report")
    return None if budget.exceeded is None else budget.exceeded.removeprefix("the arm ")


def injections(provisioned: ProvisionedEpisode) -> Sequence[ActionRecord]:
    """The provider's injection records; a broken source becomes one record saying so."""
    source = provisioned.injections
    if source is None:
        return ()
    try:
        return list(source())
    except Exception as exc:  # noqa: BLE001 - provider code: its evidence is lost, the episode is not
        return [ActionRecord("injections_unavailable", {"error": one_line(exc)})]


def action_count(n_actions: int, counts_actions: bool) -> int | None:
    """An arm's action count: null (no source) unless it recorded one or declares that it
    records every action it takes (``records_actions``), the rule of the model fields."""
    return n_actions if n_actions or counts_actions else None


def telemetry_data(
    calls: Sequence[ModelCall],
    n_actions: int | None,
    counts_model: bool = False,
    failed: bool = False,
) -> dict[str, Any]:
    """The episode.telemetry event. ``actions`` is the count :func:`action_count` gives;
    the model fields are null unless the arm made a call or declares that it counts them
    (``uses_model``), when none counted is 0 (docs/metrics.md). An arm that ``failed``
    (raised, timed out) may have died inside a call whose usage nobody reported: its
    tokens and cost are null, never a sum that leaves that call out nor a made-up 0."""
    if not calls and counts_model:
        return {
            "model_calls": 0,
            "input_tokens": None if failed else 0,
            "output_tokens": None if failed else 0,
            "cost_usd": None if failed else 0.0,
            "actions": n_actions,
            "model_latency_ms": 0.0,
            "cost_source": None if failed else "arm",
            "model_call_latency_ms": [],
        }
    known = not failed
    data: dict[str, Any] = {
        "model_calls": len(calls) if calls else None,
        "input_tokens": sum_known(c.input_tokens for c in calls) if known else None,
        "output_tokens": sum_known(c.output_tokens for c in calls) if known else None,
        "cost_usd": sum_known(c.cost_usd for c in calls) if known else None,
        "actions": n_actions,
    }
    if calls:  # only then, so a log without model calls keeps its bytes
        data["model_latency_ms"] = sum_known(c.latency_ms for c in calls)
        sources = sorted({c.cost_source for c in calls if c.cost_source is not None})
        data["cost_source"] = None if data["cost_usd"] is None else "+".join(sources) or None
        data["model_call_latency_ms"] = [c.latency_ms for c in calls]
    return data


def store_screenshot(run_dir: Path, png: Any, label: Any) -> dict[str, Any]:
    from effectbench.core.evidence import screenshot_event

    return screenshot_event(run_dir, bytes(png), str(label))


def typed(event: Any) -> tuple[str, dict[str, Any]]:
    """(type, data) of a typed event of effectbench.core.events: the only way the
    scheduler writes a line, whether to its own log or to an executor's buffer."""
    return event.TYPE, event_data(event)


def json_safe(detail: Mapping[str, Any]) -> dict[str, Any]:
    """An action's detail as JSON scalars; anything else becomes its repr, so one odd
    value from an arm cannot break the log writer."""
    out: dict[str, Any] = {}
    for k, v in detail.items():
        out[str(k)] = v if v is None or isinstance(v, (str, int, float, bool)) else repr(v)
    return out
