"""EpisodeRecord: one scored (or failed) episode, folded from the log.

It is a *projection*: every field is derived from events. ``results.jsonl`` holds one
per line, and every metric is a pure aggregation over a sequence of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from effectbench.core.model import (
    Category,
    FailureClass,
    Outcome,
    Substrate,
    SwerVariant,
    TrueState,
)


def _latency_tuple(
    value: Iterable[float | None] | None,
) -> tuple[float | None, ...] | None:
    return None if value is None else tuple(value)


def _category(value: Category | str) -> Category:
    """``Category`` as the converter, skipped for a member (the fold passes members, and an
    enum's call costs more than the rest of a record's fields)."""
    return value if type(value) is Category else Category(value)


def _substrate(value: Substrate | str) -> Substrate:
    return value if type(value) is Substrate else Substrate(value)


@attrs.frozen
class EpisodeTelemetry:
    """Per-episode telemetry; None means "no source", never zero."""

    wall_ms: float | None = None
    setup_ms: float | None = None
    model_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    actions: int | None = None
    model_latency_ms: float | None = None
    cost_source: str | None = None
    model_call_latency_ms: tuple[float | None, ...] | None = attrs.field(
        default=None, converter=_latency_tuple
    )
    """Each model call's latency in call order; None when the arm is no source of calls."""


@attrs.frozen
class EpisodeRecord:
    episode_id: str
    arm: str
    task_id: str
    trial: int
    category: Category = attrs.field(converter=_category)
    substrate: Substrate = attrs.field(converter=_substrate)
    split: str
    reversible: bool
    effect_declared: bool
    correct_action_available: bool
    reported_success: bool | None
    halted: bool | None
    true_state: TrueState | None
    outcome: Outcome | None
    swer_variant: SwerVariant | None
    eligible: bool
    """True exactly when the episode has a scored outcome (enters agent denominators)."""
    failure_class: FailureClass | None
    """None on a scored episode; why it is not scored otherwise."""
    verdict_reasons: tuple[str, ...] = ()
    observed_count: int | None = None
    expected_count: int | None = None
    telemetry: EpisodeTelemetry = EpisodeTelemetry()
    evidence: Mapping[str, str] = attrs.field(factory=dict)
    """Pointers into the log, e.g. {"reported": "events.jsonl#41", "post_read": "events.jsonl#42"}.
    """
