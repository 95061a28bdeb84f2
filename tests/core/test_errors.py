"""One base for every user-facing error, and the CLI turns any of them into one line.

The drawing of every exception class in effectbench/core/errors.py's docstring is checked
against the classes the package really defines (every module imported in a subprocess).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from effectbench.agents.exec import ContainmentUnavailable
from effectbench.api import RunError
from effectbench.arms.computer_use import ComputerUseNotConfigured
from effectbench.arms.llm import LlmNotConfigured
from effectbench.audit.checks import AuditError
from effectbench.audit.pack import PackError
from effectbench.browser.launch import BrowserUnavailable
from effectbench.cli import logsetup
from effectbench.cli.commands import main
from effectbench.core import errors
from effectbench.core.errors import ArtifactError, ConfigurationError, EffectBenchError
from effectbench.core.model import InvalidSpec
from effectbench.executors.dask import WorkerStartError
from effectbench.log.reader import ChainBroken, LogCorrupt, LogError, LogSchemaError
from effectbench.outputs import artifacts
from effectbench.postgres.server import PgConfigError
from effectbench.projections.episodes import ProjectionError
from effectbench.projections.metrics import MetricsError
from effectbench.report.data import ReportError
from effectbench.run.outdir import OutDirError, RunDirLost
from effectbench.run.plan import PlanError
from effectbench.run.registry import PluginError
from effectbench.run.scheduler import ProviderStartError, ResumeError
from effectbench.scaffold.generate import ScaffoldError

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


CONFIGURATION_ERRORS = (
    PgConfigError,
    BrowserUnavailable,
    ContainmentUnavailable,
    LlmNotConfigured,
    ComputerUseNotConfigured,
    WorkerStartError,
)


@pytest.mark.parametrize("error", CONFIGURATION_ERRORS, ids=lambda e: e.__name__)
def test_every_configuration_error_is_a_configuration_error(error: type[Exception]) -> None:
    assert issubclass(error, ConfigurationError) and issubclass(error, EffectBenchError)


def test_invalid_spec_and_plan_errors_stay_value_errors() -> None:
    # Callers that catch ValueError (plugins validating specs) keep working.
    assert issubclass(InvalidSpec, ValueError) and issubclass(PlanError, ValueError)
    assert issubclass(ScaffoldError, EffectBenchError) and issubclass(ScaffoldError, ValueError)


# Every exception class defined in effectbench: {"module.Name": [its direct bases]}, module
# relative to the package. A subprocess imports every module, so this process stays as it was.
_WALK = """
import importlib, inspect, pkgutil, sys
import orjson
import effectbench

def name(c):
    return f"{c.__module__.removeprefix('effectbench.')}.{c.__qualname__}"

found, broken = {}, []
for info in pkgutil.walk_packages(effectbench.__path__, "effectbench."):
    if info.name.rsplit(".", 1)[-1] == "__main__":
        continue  # importing it runs the command
    try:
        module = importlib.import_module(info.name)
    except Exception as exc:
        broken.append(f"{info.name}: {type(exc).__name__}: {exc}")
        continue
    for obj in vars(module).values():
        if (
            inspect.isclass(obj)
            and issubclass(obj, BaseException)
            and obj.__module__ == module.__name__
        ):
            found[name(obj)] = [name(b) for b in obj.__bases__]
sys.stdout.buffer.write(orjson.dumps({"found": found, "broken": broken}))
"""

_ENTRY = re.compile(
    r"^    (?P<tree>(?:│   |    )*(?:[├└]── )?)(?P<name>\w+)\s+(?P<module>[\w.]+)"
    r"(?:\s+(?P<note>\S.*))?$"
)


def _exception_classes() -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _WALK], capture_output=True, check=True
    )
    walked = orjson.loads(done.stdout)
    assert not walked["broken"], f"modules that do not import: {walked['broken']}"
    found: dict[str, list[str]] = walked["found"]
    return found


def _drawings() -> list[list[tuple[int, str, str | None]]]:
    """The docstring's drawings: per block, (depth, "module.Name", note) for each line."""
    blocks: list[list[tuple[int, str, str | None]]] = []
    lines = (errors.__doc__ or "").splitlines()
    for i, line in enumerate(lines):
        if not line.endswith("::"):
            continue
        block = []
        for entry in lines[i + 2 :]:
            m = _ENTRY.match(entry)
            if m is None:
                break
            depth = len(m["tree"]) // 4
            block.append((depth, f"{m['module']}.{m['name']}", m["note"]))
        blocks.append(block)
    return blocks


def test_every_exception_class_is_drawn_under_its_base_in_core_errors() -> None:
    found = _exception_classes()
    user, outside = _drawings()
    assert user[0][:2] == (0, "core.errors.EffectBenchError")
    drawn: list[str] = []
    problems: list[str] = []
    for block in (user, outside):
        parents: list[str] = []
        for depth, cls, note in block:
            drawn.append(cls)
            del parents[depth:]
            bases = found.get(cls)
            if bases is None:
                problems.append(f"{cls} is drawn but effectbench defines no such class")
                continue
            if depth and parents[-1] not in bases:
                problems.append(f"{cls} is drawn under {parents[-1]}; its bases are {bases}")
            extra = sorted(b.removeprefix("builtins.") for b in bases if b.startswith("builtins."))
            if block is user and depth:
                want = f"(+ {', '.join(extra)})" if extra else None
                if note != want:
                    problems.append(f"{cls}: draw it with {want!r}, not {note!r}")
            if block is outside and not depth and not note:
                problems.append(f"{cls} sits outside EffectBenchError: say why, after its module")
            parents.append(cls)
    twice = sorted({c for c in drawn if drawn.count(c) > 1})
    problems += [f"{c} is drawn twice" for c in twice]
    problems += [
        f"{c}: draw it in the docstring under its base (a user's error derives from "
        "EffectBenchError; any other class goes outside it, with the reason)"
        for c in sorted(set(found) - set(drawn))
    ]
    assert not problems, "effectbench/core/errors.py:\n" + "\n".join(problems)
    roots = {cls for depth, cls, _ in outside if not depth}
    assert not any("core.errors.EffectBenchError" in found[c] for c in roots)


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
