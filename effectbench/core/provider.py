"""What a third party implements to bring its own system of record and oracle.

A provider owns three things the harness cannot invent: the product the arm drives,
the tasks, and an *independent* oracle that reads the system of record over a path
the arm never receives. The harness owns planning, timing, logging and scoring.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Final, Literal, Protocol, runtime_checkable

import attrs
import orjson

from effectbench.core.agentlog import MODEL_CALL_BYTES, LogBudget, action_bytes
from effectbench.core.model import JSONScalar, Snapshot, TaskSpec
from effectbench.core.store import RecordStore

if TYPE_CHECKING:
    from playwright.async_api import Page

ScreenshotPolicy = Literal["none", "final", "all"]
SCREENSHOT_POLICIES: Final[tuple[ScreenshotPolicy, ...]] = ("none", "final", "all")


@runtime_checkable
class Oracle(Protocol):
    """Reads the system of record, read-only. Never raises for an unreachable store:
    returns ``Snapshot.unreadable(reason)`` so the harness can re-read with backoff."""

    async def read(self) -> Snapshot: ...


@runtime_checkable
class ProductVerifier(Protocol):
    """The product's *own* record-readback (e.g. its REST read endpoint), distinct from
    the harness oracle. Offered to arms so an effect-verifying agent can check its work."""

    async def read(self) -> Snapshot: ...


@attrs.frozen
class ProductResponse:
    """What the product showed after a submission: the screen's claim, not the truth."""

    screen_says_saved: bool
    status: int | None = None
    message: str = ""


@runtime_checkable
class ProductDriver(Protocol):
    """A scripted action channel into the product (for reference and adversary arms).

    ``submit`` performs one user-level submission with the given field values through
    the product's own UI/API path, so the provider's injected fault applies to it.
    """

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse: ...


@runtime_checkable
class BrowserDriver(Protocol):
    """How a person uses the product's pages in a browser, for the browser arms: submit
    one form (the banner the next page shows) and read the records back from the
    product's pages. The provider knows its pages; the arm decides what to trust. A
    provider without one gets MockMed's page conventions (docs/browser.md).

    Optional: ``async def sign_in(self, page: Page) -> None`` logs the page in as the
    episode's user; the ``computer_use`` arm calls it before its first screenshot, so a
    model that only sees pixels starts signed in (docs/computer-use.md)."""

    async def submit(
        self, page: Page, values: Mapping[str, JSONScalar], telemetry: Telemetry
    ) -> ProductResponse: ...

    async def read(self, page: Page) -> Snapshot: ...


@attrs.frozen
class ActionRecord:
    kind: str
    detail: Mapping[str, JSONScalar] = attrs.field(factory=dict)


@attrs.frozen
class ModelCall:
    """One model call's usage. Unknown fields stay None, never 0."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    cost_source: str | None = None
    """Where ``cost_usd`` came from: ``"arm"`` (the endpoint reported it),
    ``"price_table:<version>"``, or None when unknown."""
    model: str | None = None
    """The model called, as a price table names it; lets the harness's ``--prices``
    table price a call whose cost the arm did not report. None when unknown."""


@attrs.frozen
class Screenshot:
    """One image an arm recorded, as evidence of what the screen showed. ``after`` is how
    many actions were recorded before it, so the log keeps the two in order."""

    png: bytes = attrs.field(repr=False)
    label: str
    after: int


@attrs.frozen
class PageViewport:
    """The size of a protocol agent's episode page: CSS pixels and device pixels per CSS
    pixel (a screenshot is ``width * device_scale_factor`` pixels wide)."""

    width: int
    height: int
    device_scale_factor: float = 1.0


@runtime_checkable
class PageCamera(Protocol):
    """The harness's own hold on a protocol agent's episode page: it captures that page
    (and no other) over the harness's connection to the browser, never the agent's, so
    what it records is evidence the agent cannot forge (docs/agent-protocol.md)."""

    viewport: PageViewport

    async def capture(self) -> bytes:
        """The page now, as PNG bytes; raises when the page is gone."""
        ...


@attrs.define
class Telemetry:
    """Per-episode recorder an arm writes to; the scheduler turns it into events.

    Mutable by design and owned by exactly one episode; it holds no path to the oracle.
    """

    actions: list[ActionRecord] = attrs.field(factory=list)
    model_calls: list[ModelCall] = attrs.field(factory=list)
    screenshots: list[Screenshot] = attrs.field(factory=list)
    screenshot_policy: ScreenshotPolicy = "all"
    """Set by the scheduler from ``--screenshots``: with ``none`` an arm should not take any
    (they cost time); with ``final`` only an episode's last one is kept."""
    log_budget: LogBudget | None = None
    """Set by the scheduler from ``--agent-log-budget``: every action and model call is
    charged to it, and the one past it raises ``LogBudgetExceeded`` and is not kept."""

    def action(self, kind: str, **detail: JSONScalar) -> None:
        if self.log_budget is not None:
            self.log_budget.charge(action_bytes(kind, detail), f"action {len(self.actions) + 1}")
        self.actions.append(ActionRecord(kind, detail))

    @property
    def wants_screenshots(self) -> bool:
        return self.screenshot_policy != "none"

    def screenshot(self, png: bytes, label: str = "", *, after: int | None = None) -> None:
        """Record a PNG; the harness stores it by content hash and logs the hash. ``after``:
        how many actions it follows (default: all recorded so far), for a capture that
        began before actions recorded while it ran."""
        if self.wants_screenshots:
            follows = len(self.actions) if after is None else min(after, len(self.actions))
            self.screenshots.append(Screenshot(bytes(png), label, follows))

    def model_call(self, call: ModelCall) -> None:
        if self.log_budget is not None:
            self.log_budget.charge(MODEL_CALL_BYTES, f"model call {len(self.model_calls) + 1}")
        self.model_calls.append(call)


CONFUSABLE_CHANNEL: Final = "confusable"
ALTERNATIVES_CHANNEL: Final = "alternatives"


_SCALARS: Final = (str, int, float, bool)


def _scalar(value: object) -> bool:
    """A value an alternative may be: a JSON scalar other than null (None means "no
    alternative" to the adversaries)."""
    return isinstance(value, _SCALARS)


def _records(value: Mapping[str, JSONScalar]) -> Mapping[str, JSONScalar]:
    return dict(value)


def _values(
    value: Mapping[str, Sequence[JSONScalar]],
) -> Mapping[str, tuple[JSONScalar, ...]]:
    return {str(k): tuple(v) for k, v in value.items()}


@attrs.frozen
class Alternatives:
    """What an adversary may write instead of the right value, as the product accepts it.

    A product that validates input (an enumerated priority, a foreign key) refuses a
    made-up value such as ``critical-x``, so an attack built on one tests the product's
    validation, not the oracle. ``records`` (channel ``confusable``, ``{field: value}``):
    a value naming another existing record an arm could confuse with the intended one
    (``wrong_target`` and ``extra_change`` aim there). ``values`` (channel
    ``alternatives``, ``{field: [value, ...]}``): values the product accepts for a field
    (``wrong_value_<i>`` writes the first that differs). Both go to every arm in its
    channels: offer only what the product's own screens show."""

    RECORDS_CHANNEL: ClassVar[str] = CONFUSABLE_CHANNEL
    VALUES_CHANNEL: ClassVar[str] = ALTERNATIVES_CHANNEL

    records: Mapping[str, JSONScalar] = attrs.field(factory=dict, converter=_records)
    values: Mapping[str, tuple[JSONScalar, ...]] = attrs.field(factory=dict, converter=_values)

    def __attrs_post_init__(self) -> None:
        bad = [k for k, v in self.records.items() if not _scalar(v)]
        bad += [k for k, vs in self.values.items() if not all(_scalar(v) for v in vs)]
        if bad:
            raise TypeError(f"alternatives for {sorted(bad)} must be JSON scalars, not null")

    def channels(self) -> dict[str, str]:
        """The channels that carry these to an arm (none for what is empty)."""
        out: dict[str, str] = {}
        if self.records:
            out[CONFUSABLE_CHANNEL] = orjson.dumps(dict(self.records)).decode()
        if self.values:
            out[ALTERNATIVES_CHANNEL] = orjson.dumps(
                {k: list(v) for k, v in self.values.items()}
            ).decode()
        return out

    @classmethod
    def from_channels(cls, channels: Mapping[str, str]) -> Alternatives:
        """What an episode's channels offer; anything malformed offers nothing (an arm
        never fails on a provider's typo, the audit just falls back to its mutations)."""
        records = _object(channels.get(CONFUSABLE_CHANNEL))
        values = _object(channels.get(ALTERNATIVES_CHANNEL))
        return cls(
            {str(k): v for k, v in records.items() if isinstance(v, _SCALARS)},
            {
                str(k): tuple(x for x in v if _scalar(x))
                for k, v in values.items()
                if isinstance(v, list)
            },
        )

    def record(self, field: str, current: JSONScalar) -> JSONScalar | None:
        """The confusable record for ``field``, when one is offered and is not ``current``."""
        if field in self.records and self.records[field] != current:
            return self.records[field]
        return None

    def value(self, field: str, current: JSONScalar) -> JSONScalar | None:
        """Another value of ``field``: its confusable record, else the first offered
        valid value that differs from ``current``; None when none is offered."""
        found = self.record(field, current)
        if found is not None:
            return found
        for candidate in self.values.get(field, ()):
            if candidate != current:
                return candidate
        return None


def _object(raw: str | None) -> dict[str, object]:
    if not raw:
        return {}
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


@attrs.frozen
class EnvHandle:
    """Everything an arm may touch. Structurally holds no oracle: only the product's
    channels (e.g. ``{"base_url": ...}``), an optional product driver and an optional
    product verifier, and the telemetry recorder. ``browser`` is a Playwright page in a
    context of this episode's own, filled by the harness for an arm that asks for one
    (``uses_browser = True``); providers leave it None. ``browser_cdp`` is the same for
    an out-of-process agent (``uses_browser_cdp = True``): a CDP endpoint URL that
    reaches only this episode's browser context."""

    channels: Mapping[str, str]
    telemetry: Telemetry = attrs.field(factory=Telemetry)
    driver: ProductDriver | None = None
    verifier: ProductVerifier | None = None
    browser: Page | None = None
    browser_cdp: str | None = None
    browser_driver: BrowserDriver | None = None
    """The product's page mechanics for the browser arms (None: MockMed's conventions)."""
    browser_camera: PageCamera | None = None
    """With ``browser_cdp``: the harness's own capture of that episode's page, for the
    protocol's ``screenshot`` request and ``--screenshots`` (None: no browser). A
    provider of a remote display sets it to its framebuffer's (displays/camera.py)."""

    def product_effect_verifier(self) -> ProductVerifier | None:
        """The product's own readback, or None when the provider authored none."""
        return self.verifier

    def alternatives(self) -> Alternatives:
        """The confusable records and valid alternative values the provider offers in
        the channels (effectbench.core.alternatives; empty when it offers none)."""
        return Alternatives.from_channels(self.channels)


@attrs.frozen
class ProvisionedEpisode:
    """One fresh, isolated system of record for (task, trial).

    ``env`` goes to the arm; ``oracle`` stays with the harness. ``teardown`` releases
    the episode's resources (its database file, its session) and must be idempotent.
    """

    env: EnvHandle
    oracle: Oracle
    teardown: Callable[[], Awaitable[None]]
    injections: Callable[[], Sequence[ActionRecord]] | None = None
    """What the provider's fault injection did to the arm's traffic (e.g. a
    ``FaultProxy``'s records), read once the arm has returned; each record becomes an
    ``episode.injected`` event. None: the provider injects nothing it can report."""
    store: RecordStore | None = None
    """The mutation audit's write handle on this episode's system of record
    (``effectbench.core.store``; docs/audit.md). The harness alone uses it, on twins the
    audit provisions; an arm never sees it. None: derived from the oracle when that is
    the generic ``SqliteAllTablesOracle``, else the store cannot be mutation-tested."""
    gone: Callable[[], str | None] | None = None
    """Why this episode's own service (a per-episode server process) is no longer there,
    or None while it is; asked once the arm is done. A dead one makes the episode an
    ``environment`` failure, never the agent's. None: the provider cannot tell."""


@runtime_checkable
class BenchmarkProvider(Protocol):
    """The seam a third party implements (see docs/writing-a-provider.md).

    Lifecycle: ``start`` once per run (shared resources such as a server), then
    ``provision`` per episode, then ``stop``. Tasks are a pure property of the
    provider and its version, so a run's plan can be fingerprinted and resumed.

    Optional: ``async def preflight(self, options: Mapping[str, str]) -> None``, called
    before the run directory is created with the run's provider options (``--pg-dsn``
    arrives as ``{"pg-dsn": ...}``); what it raises is shown to the user as one line.
    """

    name: str
    version: str

    def tasks(self) -> Sequence[TaskSpec]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode: ...


class SkipEpisode(Exception):
    """Raise from ``provision`` to skip an episode on purpose (e.g. a substrate this host
    lacks). The episode is recorded with failure class ``skipped`` and the message as its
    reason; it never enters agent denominators and is not an error of anyone's."""
