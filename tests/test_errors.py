"""One base for every user-facing error, and the CLI turns any of them into one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectbench.api import RunError
from effectbench.audit.checks import AuditError
from effectbench.audit.pack import PackError
from effectbench.cli import logsetup
from effectbench.cli.commands import main
from effectbench.core.errors import ArtifactError, EffectBenchError
from effectbench.core.model import InvalidSpec
from effectbench.log.reader import ChainBroken, LogCorrupt, LogError, LogSchemaError
from effectbench.outputs import artifacts
from effectbench.projections.episodes import ProjectionError
from effectbench.projections.metrics import MetricsError
from effectbench.report.data import ReportError
from effectbench.run.outdir import OutDirError, RunDirLost
from effectbench.run.plan import PlanError
from effectbench.run.registry import PluginError
from effectbench.run.scheduler import ProviderStartError, ResumeError

USER_ERRORS = (
    RunError,
    PlanError,
    PluginError,
    LogError,
    LogCorrupt,
    ChainBroken,
    LogSchemaError,
    ResumeError,
    ProviderStartError,
    OutDirError,
    RunDirLost,
    InvalidSpec,
    ProjectionError,
    MetricsError,
    ArtifactError,
    AuditError,
    PackError,
    ReportError,
)


@pytest.mark.parametrize("error", USER_ERRORS, ids=lambda e: e.__name__)
def test_every_user_error_subclasses_the_base(error: type[Exception]) -> None:
    assert issubclass(error, EffectBenchError)


def test_invalid_spec_and_plan_errors_stay_value_errors() -> None:
    # Callers that catch ValueError (plugins validating specs) keep working.
    assert issubclass(InvalidSpec, ValueError) and issubclass(PlanError, ValueError)


def test_the_cli_reports_any_effectbench_error_as_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class BrandNewError(EffectBenchError):
        """A user error type the CLI has never heard of."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise BrandNewError("the run directory needs X; do Y")

    (tmp_path / "events.jsonl").write_bytes(b"")
    monkeypatch.setattr(artifacts, "rescore_artifacts", refuse)
    # In-process: keep the command from configuring logging for the rest of the session.
    monkeypatch.setattr(logsetup, "configure", lambda *_args, **_kwargs: None)
    assert main(["rescore", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == "effectbench: error: the run directory needs X; do Y\n"
