"""results.jsonl rows: one EpisodeRecord <-> one sorted-key JSON object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs
import orjson

from effectbench.core.model import (
    Category,
    FailureClass,
    Outcome,
    Substrate,
    SwerVariant,
    TrueState,
)
from effectbench.scoring.records import EpisodeRecord, EpisodeTelemetry

__all__ = ["LINE_OPTS", "ROW_OPTS", "TASK_AXES", "record_from_row", "record_row"]

ROW_OPTS: Final = orjson.OPT_SORT_KEYS
LINE_OPTS: Final = ROW_OPTS | orjson.OPT_APPEND_NEWLINE
"""A row as its results.jsonl line, newline included (no copy to append it)."""
TASK_AXES: Final = (
    "category",
    "substrate",
    "split",
    "reversible",
    "effect_declared",
    "correct_action_available",
)
"""The task facts every episode row repeats (and the verifier checks against the task)."""


# --------------------------------------------------------------------------- rows


def record_row(rec: EpisodeRecord) -> dict[str, Any]:
    """One results.jsonl row. Labels keep their enum values (``_value_``: the same value,
    without the ``value`` property's descriptor call, six times per episode of a rescore);
    unknown telemetry stays null."""
    t = rec.telemetry
    return {
        "episode_id": rec.episode_id,
        "arm": rec.arm,
        "task_id": rec.task_id,
        "trial": rec.trial,
        "category": rec.category._value_,
        "substrate": rec.substrate._value_,
        "split": rec.split,
        "reversible": rec.reversible,
        "effect_declared": rec.effect_declared,
        "correct_action_available": rec.correct_action_available,
        "reported_success": rec.reported_success,
        "halted": rec.halted,
        "true_state": None if rec.true_state is None else rec.true_state._value_,
        "outcome": None if rec.outcome is None else rec.outcome._value_,
        "swer_variant": None if rec.swer_variant is None else rec.swer_variant._value_,
        "eligible": rec.eligible,
        "failure_class": None if rec.failure_class is None else rec.failure_class._value_,
        "verdict_reasons": list(rec.verdict_reasons),
        "observed_count": rec.observed_count,
        "expected_count": rec.expected_count,
        "telemetry": {
            "wall_ms": t.wall_ms,
            "setup_ms": t.setup_ms,
            "model_calls": t.model_calls,
            "input_tokens": t.input_tokens,
            "output_tokens": t.output_tokens,
            "cost_usd": t.cost_usd,
            "actions": t.actions,
            # model-call fields only where the arm made model calls (older rows keep their bytes)
            **(
                {}
                if t.model_calls is None
                else {
                    "model_latency_ms": t.model_latency_ms,
                    "cost_source": t.cost_source,
                    **(
                        {}
                        if t.model_call_latency_ms is None
                        else {"model_call_latency_ms": list(t.model_call_latency_ms)}
                    ),
                }
            ),
        },
        "evidence": dict(rec.evidence),
    }


def _enum(cls: Any, value: Any) -> Any:
    return None if value is None else cls(value)


def record_from_row(row: Mapping[str, Any]) -> EpisodeRecord:
    """The EpisodeRecord a results.jsonl row stands for (ValueError/KeyError when malformed)."""
    tel = row.get("telemetry") or {}
    return EpisodeRecord(
        episode_id=row["episode_id"],
        arm=row["arm"],
        task_id=row["task_id"],
        trial=int(row["trial"]),
        category=Category(row["category"]),
        substrate=Substrate(row["substrate"]),
        split=row["split"],
        reversible=bool(row["reversible"]),
        effect_declared=bool(row["effect_declared"]),
        correct_action_available=bool(row["correct_action_available"]),
        reported_success=row["reported_success"],
        halted=row.get("halted"),
        true_state=_enum(TrueState, row["true_state"]),
        outcome=_enum(Outcome, row["outcome"]),
        swer_variant=_enum(SwerVariant, row["swer_variant"]),
        eligible=bool(row["eligible"]),
        failure_class=_enum(FailureClass, row["failure_class"]),
        verdict_reasons=tuple(row.get("verdict_reasons") or ()),
        observed_count=row.get("observed_count"),
        expected_count=row.get("expected_count"),
        telemetry=EpisodeTelemetry(**{k: tel.get(k) for k in attrs.fields_dict(EpisodeTelemetry)}),
        evidence=dict(row.get("evidence") or {}),
    )
