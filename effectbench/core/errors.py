"""The one base of every user-facing error, and the map of every exception class.

A user error is something the user can fix (a wrong option, a directory that is not a
run, a broken plugin, a host that lacks what a run needs): its message says what to do,
and the CLI prints it on one line and exits 2 by catching ``EffectBenchError``. Anything
else is a bug. A configuration error (``ConfigurationError``) is the kind found on this
host or in its settings: a server, a browser, a display, bubblewrap, a model endpoint, a
worker.

Every exception class defined in effectbench is drawn below, each under its direct base,
with the module (under ``effectbench.``) that defines it; ``(+ ValueError)`` names a second
base that callers may catch. ``tests/core/test_errors.py`` checks both drawings against the
classes the package defines, so a new class goes in here or the test fails::

    EffectBenchError            core.errors
    ├── ArtifactError           core.errors
    │   └── PartialExport       verify.export
    ├── AuditError              audit.checks
    ├── ConfigurationError      core.errors
    │   ├── BrowserStartError   browser.lifecycle
    │   ├── BrowserUnavailable  browser.launch
    │   ├── ComputerUseNotConfigured  arms.computer_use
    │   ├── ContainmentUnavailable  agents.exec
    │   ├── DisplayStartError   displays.server
    │   ├── DisplaysUnavailable  displays.tools
    │   │   └── OcrUnavailable  displays.ocr
    │   ├── LlmNotConfigured    arms.llm
    │   ├── PgConfigError       postgres.server
    │   └── WorkerStartError    executors.dask_worker
    ├── ExecutorError           executors.base
    ├── InvalidSpec             core.errors         (+ ValueError)
    ├── LogError                log.lines
    │   └── LogCorrupt          log.lines
    │       ├── ChainBroken     log.lines
    │       └── LogSchemaError  log.lines
    ├── MetricsError            projections.metrics (+ ValueError)
    ├── OptionsError            run.defaults        (+ ValueError)
    ├── OutDirError             run.outdir
    ├── PackError               audit.pack          (+ ValueError)
    ├── PlanError               run.plan            (+ ValueError)
    ├── PluginError             run.registry
    │   └── UnknownPlugin       run.registry
    ├── PriceTableError         core.prices         (+ ValueError)
    ├── ProjectionError         projections.episodes (+ ValueError)
    ├── ProviderStartError      run.scheduler
    ├── ReportError             report.errors
    ├── ResumeError             run.resume
    ├── RunDirLost              run.outdir
    ├── RunError                run.request
    ├── ScaffoldError           scaffold.generate   (+ ValueError)
    ├── StorageError            run.storage
    └── StoreRefused            core.store

Outside it, on purpose: signals caught where they are raised, an episode's failure that
the log records, and warnings. None is an error of the user's, and none reaches the CLI
(if one did, it would be a bug: "internal error", exit 1). Each root says why::

    AccessibilityError          displays.atspi      an app did not answer as asked: the driver fails
    ActionError                 arms.computer_use.actions  a bad action: back to the model
    AgentFailure                agents.channel      an agent failed an episode: its logged failure
    ├── AgentExited             agents.channel
    ├── AgentGaveUp             agents.channel
    ├── AgentMalformed          agents.channel
    │   └── AgentOverBudget     agents.channel
    ├── AgentStartFailed        agents.channel
    └── AgentTimeout            agents.channel
    BusHandshakeError           displays.bus_relay  a relayed client's handshake failed: closed
    CdpError                    browser.cdp         a DevTools command failed; the proxy handles it
    DoorError                   agents.door         an agent's way out did not open: its failure
    FixtureError                agents.reference.effect_verified  the agent reads it as UNREADABLE
    LogBudgetExceeded           core.agentlog       an arm past its log budget: the episode fails
    ModelEndpointError          arms.llm.client     the model endpoint failed the arm's episode
    NotOnScreen                 displays.pixels     a phrase did not show: the driver fails
    PortTaken                   providers_kit       a lost port race: the product starts again
    RfbError                    displays.rfb        a VNC server refused a client: its caller fails
    SkipEpisode                 core.provider       a provider declined an episode: it is skipped
    ToolError                   arms.llm.tools      a bad tool call: its message goes to the model
    TooManyWaiting              agents.shots        too many screenshot requests: its episode fails
    PluginWarning               run.registry        a warning (warnings.warn), never raised
    └── DuplicatePluginWarning  run.registry
    _Episode                    run.episode         an episode stage failed, with a failure class
    _FixtureError               scoring.diff        fixture and diff disagree: indeterminate
    _NoTwin                     run.mutate          no twin for a mutation: the audit logs why
    _NotPlain                   core.codec          left by the fast decoder to the converter
    _ProxyLoop                  faults.proxy        an upstream that is the proxy: answered 502
    _Unsound                    outputs.parallel    left by a worker to the one-process pass
"""

from __future__ import annotations

__all__ = ["ArtifactError", "ConfigurationError", "EffectBenchError", "InvalidSpec", "one_line"]


class EffectBenchError(Exception):
    """Base of every error whose message is meant for the user."""


class ArtifactError(EffectBenchError):
    """The artifacts cannot be built; the message says what is wrong and what to do."""


class ConfigurationError(EffectBenchError):
    """This host or its settings lack what a run needs (a server, a browser, bubblewrap, a
    model endpoint, a worker's setup); the message says what to install or set."""


def one_line(exc: BaseException, limit: int = 500) -> str:
    """An exception as one line of a message or a log field: its type and its words,
    cut to ``limit`` characters (an arm's reason may be longer, see run/episode.py)."""
    text = " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


class InvalidSpec(EffectBenchError, ValueError):
    """A task, effect or oracle declaration that the benchmark refuses to score.

    Here, not beside the task types, because both of their modules raise it
    (``core.effects`` and ``core.model``, which re-exports it)."""
