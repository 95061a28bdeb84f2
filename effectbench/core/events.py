"""The typed, versioned events of a run. The log is the only source of truth.

On disk each event is one JSON line (see docs/event-log.md and
effectbench/schema/events.schema.json)::

    {"v":1,"seq":N,"type":"episode.reported","ts":..., "ep":"<arm>::<task>::t<trial>",
     "data":{...},"h":"<sha256 hex>"}

``v`` is the schema major: a reader refuses a major it does not know. ``h`` chains
the line to the previous one (see effectbench.log.reader). ``ts`` is wall-clock seconds and
is the only field allowed to differ between two runs of the same plan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from effectbench.core import versions
from effectbench.core.model import FailureClass, JSONScalar

SCHEMA_MAJOR: Final = versions.EVENTS_SCHEMA_MAJOR
SCHEMA_ID: Final = versions.EVENTS_SCHEMA_ID


@attrs.frozen
class RunStarted:
    """First event of a log: the full plan, so the log alone can be rescored."""

    TYPE = "run.started"
    run_id: str
    plan: Mapping[str, Any]
    plan_hash: str
    versions: Mapping[str, str]
    concurrency: int | None = None
    """The concurrency bound of the run (the manifest reports it; not part of the plan)."""
    execution: Mapping[str, str] = attrs.field(factory=dict)
    """How each arm runs: ``in_process``, ``subprocess`` or ``isolated``."""
    containment: str | None = attrs.field(default=None, metadata={"omit_none": True})
    """Why a protocol agent could not be contained (left out of the line when None)."""
    min_coverage: float | None = attrs.field(default=None, metadata={"omit_none": True})
    """The least coverage each arm needs (``run --min-coverage``); a log from before the
    option has none, and is read with the default (docs/exit-codes.md)."""
    from_provider: Mapping[str, int | float] | None = attrs.field(
        default=None, metadata={"omit_none": True}
    )
    """The provider's recommendations the run took because no value was asked
    (``concurrency``, ``provider_timeout``); left out of the line when it took none."""


@attrs.frozen
class RunResumed:
    TYPE = "run.resumed"
    plan_hash: str
    kept: int
    abandoned: int
    concurrency: int | None = None
    """The concurrency bound of this session."""
    execution: Mapping[str, str] = attrs.field(factory=dict)
    """How each arm runs in this session."""
    containment: str | None = attrs.field(default=None, metadata={"omit_none": True})
    """Why a protocol agent could not be contained in this session."""
    min_coverage: float | None = attrs.field(default=None, metadata={"omit_none": True})
    """This session's ``--min-coverage``: the latest session's is the run's threshold."""
    from_provider: Mapping[str, int | float] | None = attrs.field(
        default=None, metadata={"omit_none": True}
    )
    """The provider's recommendations this session took (a recorded concurrency is kept)."""


@attrs.frozen
class RunFinished:
    TYPE = "run.finished"
    interrupted: bool
    episodes_finished: int
    episodes_failed: int


@attrs.frozen
class EpisodePlanned:
    """Everything scoring needs about the task, frozen at plan time."""

    TYPE = "episode.planned"
    arm: str
    task_id: str
    trial: int
    params: Mapping[str, str]
    category: str
    substrate: str
    split: str
    reversible: bool
    effect_declared: bool
    correct_action_available: bool
    effect: Mapping[str, Any]
    effect_hash: str


@attrs.frozen
class EpisodeProvisioned:
    TYPE = "episode.provisioned"
    setup_ms: float


@attrs.frozen
class PreSnapshot:
    TYPE = "episode.pre_snapshot"
    attempt: int
    snapshot: Mapping[str, Any]


@attrs.frozen
class ArmStarted:
    TYPE = "episode.arm_started"


@attrs.frozen
class ArmAction:
    TYPE = "episode.action"
    kind: str
    detail: Mapping[str, JSONScalar]


@attrs.frozen
class ArmScreenshot:
    """A screenshot the arm recorded, stored once at ``path`` (``blobs/sha256/<sha256>.png``
    under the run directory); the hash here puts the image under the chain."""

    TYPE = "episode.screenshot"
    sha256: str
    path: str
    bytes: int
    media_type: str
    label: str


@attrs.frozen
class Injected:
    """What the provider's fault injection (e.g. the fault proxy) did to one of the arm's
    requests: environment evidence, not an arm action, so it never counts as one."""

    TYPE = "episode.injected"
    kind: str
    detail: Mapping[str, JSONScalar]


@attrs.frozen
class ArmTelemetry:
    """Model usage; each field None when the arm gave no source for it."""

    TYPE = "episode.telemetry"
    model_calls: int | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    actions: int | None
    """Actions the arm recorded; None unless it recorded one or declares ``records_actions``."""
    model_latency_ms: float | None = attrs.field(
        default=None, metadata={"only_with": "model_calls"}
    )
    """Sum of the calls' latencies; present only when there were model calls."""
    cost_source: str | None = attrs.field(default=None, metadata={"only_with": "model_calls"})
    """Where cost_usd came from (``arm``, ``price_table:<version>``, several joined by
    ``+``); present only when there were model calls."""
    model_call_latency_ms: list[float | None] | None = attrs.field(
        default=None, metadata={"omit_none": True}
    )
    """Each call's latency in call order (null where unknown); present only when there
    were model calls or the arm counts them (``uses_model``)."""


@attrs.frozen
class Reported:
    TYPE = "episode.reported"
    reported_success: bool
    halted: bool
    message: str
    wall_ms: float


@attrs.frozen
class PostRead:
    TYPE = "episode.post_read"
    attempt: int
    snapshot: Mapping[str, Any]


@attrs.frozen
class ReferencePreSnapshot:
    """The twin's oracle read before the reference program ran (a reference-mode diff):
    with its post read, the expected diff of this episode, so rescore needs no twin."""

    TYPE = "episode.reference_pre_snapshot"
    arm: str
    snapshot: Mapping[str, Any]


@attrs.frozen
class ReferencePostRead:
    """The twin's oracle read after the reference program ran, and what it reported."""

    TYPE = "episode.reference_post_read"
    arm: str
    snapshot: Mapping[str, Any]
    reported_success: bool
    message: str


@attrs.frozen
class MutationPlanned:
    """The oracle mutation audit of a reference episode (docs/audit.md): on a twin, the
    store was read before and after the reference ran; ``mutations`` (each a
    ``run.mutations.Mutation.plain()``, its name included) follow, one
    ``episode.mutation_read`` each. ``tested`` False: nothing could be mutated
    (``reason`` says why), so the task is not mutation-tested."""

    TYPE = "episode.mutation_planned"
    tested: bool
    reason: str
    mutations: tuple[Mapping[str, Any], ...] = ()
    written: tuple[str, ...] = ()
    """The rows the reference wrote, changed or removed, one line each."""
    skipped: tuple[str, ...] = ()
    """Mutations not applied: the task declares their column or table irrelevant."""


@attrs.frozen
class MutationRead:
    """One mutation applied to a fresh twin after the reference ran, and the oracle's
    read of the result. ``status``: ``applied``, ``refused`` (the store cannot hold that
    state: not counted) or ``error`` (no twin could be had). ``pre``: the twin's read
    before the reference ran, None when it equals the episode's own pre-snapshot."""

    TYPE = "episode.mutation_read"
    index: int
    mutation: Mapping[str, Any]
    status: str
    detail: str
    pre: Mapping[str, Any] | None = None
    snapshot: Mapping[str, Any] | None = None


@attrs.frozen
class EpisodeFinished:
    TYPE = "episode.finished"


@attrs.frozen
class EpisodeFailed:
    TYPE = "episode.failed"
    failure_class: FailureClass = attrs.field(converter=FailureClass)
    stage: str
    error: str
    traceback: str | None = attrs.field(default=None, metadata={"omit_none": True})
    """The provider's traceback, on the first episode its error ended (run/provider_errors.py);
    left out of the line otherwise."""


@attrs.frozen
class EpisodeAbandoned:
    """Written on resume for an episode that had started but not ended; it runs again."""

    TYPE = "episode.abandoned"
    reason: str


EVENT_TYPES: Final[Mapping[str, type]] = {
    cls.TYPE: cls
    for cls in (
        RunStarted,
        RunResumed,
        RunFinished,
        EpisodePlanned,
        EpisodeProvisioned,
        PreSnapshot,
        ArmStarted,
        ArmAction,
        ArmScreenshot,
        Injected,
        ArmTelemetry,
        Reported,
        PostRead,
        ReferencePreSnapshot,
        ReferencePostRead,
        MutationPlanned,
        MutationRead,
        EpisodeFinished,
        EpisodeFailed,
        EpisodeAbandoned,
    )
}
TERMINAL_TYPES: Final = frozenset({EpisodeFinished.TYPE, EpisodeFailed.TYPE})


def event_data(event: Any) -> dict[str, Any]:
    """Plain-JSON data of a typed event: its fields in declaration order (the line's key
    order). A field marked ``omit_none`` is left out while None, and one marked
    ``only_with=NAME`` while field NAME is None, as lines written before the field
    existed had it. Shallow, and enums stay enums (a StrEnum is its value in JSON and
    compares equal to it): the scheduler writes every event through here, so it must
    cost about what a hand-built dict did."""
    cls = type(event)
    to_data = _TO_DATA.get(cls) or _compile_to_data(cls)
    return to_data(event)


_TO_DATA: dict[type, Callable[[Any], dict[str, Any]]] = {}
"""Each event class's data function (worked out on first use from what it declares)."""


def _compile_to_data(cls: type) -> Callable[[Any], dict[str, Any]]:
    """A function building the class's data as one dict literal (what attrs does for
    ``__init__``): field names are identifiers, so the source is safe to compile."""
    fields = attrs.fields(cls)
    body = ", ".join(f"{f.name!r}: e.{f.name}" for f in fields)
    lines = ["def to_data(e):", f"    d = {{{body}}}"]
    for f in fields:
        gate = f.name if f.metadata.get("omit_none") else f.metadata.get("only_with")
        if gate is not None:
            lines.append(f"    if e.{gate} is None: del d[{f.name!r}]")
    lines.append("    return d")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<event_data {cls.__name__}>", "exec"), namespace)  # noqa: S102
    to_data: Callable[[Any], dict[str, Any]] = namespace["to_data"]
    _TO_DATA[cls] = to_data
    return to_data
