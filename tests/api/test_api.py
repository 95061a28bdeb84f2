"""The public API: ``execute`` and ``evaluate*`` from a RunRequest and RunOptions or from
their keywords, resume reconciliation, the defaults, and a provider's recommendations
(applied when nothing is asked, never over what is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from cli_env import TESTS, pythonpath_env

# The CLI subprocess imports plugins from this test module itself.
HERE = Path(__file__).resolve().parent

from effectbench import RunOptions, RunRequest
from effectbench.api import RunError, RunResult, evaluate_provider, execute
from effectbench.run.options import DEFAULTS, OptionsError
from effectbench.testing import InMemoryProvider, ScriptedArm, run_cli, strip_timing


class RecommendingProvider(InMemoryProvider):
    """A provider that says what it can take, as Roundup does."""

    recommended_concurrency = 2
    provisioning_timeout = 0.5


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in (run_dir / "events.jsonl").read_bytes().splitlines()]


def _session(run_dir: Path, kind: str = "run.started") -> dict[str, Any]:
    (event,) = [e for e in _events(run_dir) if e["type"] == kind]
    data: dict[str, Any] = event["data"]
    return data


def _rows(result: RunResult) -> list[Any]:
    lines = (result.run_dir / "results.jsonl").read_bytes().splitlines()
    return [strip_timing(orjson.loads(line)) for line in lines]


def _execute(*args: Any, **kw: Any) -> RunResult:
    async def go() -> RunResult:
        return await execute(*args, **kw)

    return anyio.run(go)


def _failure_reasons(run_dir: Path) -> list[str]:
    return [str(e["data"]["error"]) for e in _events(run_dir) if e["type"] == "episode.failed"]


def test_execute_takes_a_request_and_options_as_the_keywords_do(tmp_path: Path) -> None:
    request = RunRequest(
        provider=InMemoryProvider(("ok", "phantom")),
        arms=(ScriptedArm(),),
        trials=2,
        out=tmp_path / "objects",
    )
    by_objects = _execute(request, RunOptions(concurrency=3, report=False))
    by_keywords = _execute(
        provider=InMemoryProvider(("ok", "phantom")),
        arms=[ScriptedArm()],
        trials=2,
        out=tmp_path / "keywords",
        concurrency=3,
        report=False,
    )
    assert _rows(by_objects) == _rows(by_keywords) and len(_rows(by_objects)) == 4
    assert strip_timing(by_objects.metrics["arms"]) == strip_timing(by_keywords.metrics["arms"])
    assert _session(by_objects.run_dir)["concurrency"] == 3
    assert not (by_objects.run_dir / "report.html").exists()


def test_keywords_go_over_the_objects_and_evaluate_takes_options(tmp_path: Path) -> None:
    request = RunRequest(provider=InMemoryProvider(), arms=(ScriptedArm(),), trials=1)
    result = _execute(request, RunOptions(concurrency=1), trials=3, out=tmp_path / "a")
    assert result.metrics["arms"]["scripted"]["n_episodes"] == 3
    via_evaluate = evaluate_provider(
        ScriptedArm(), InMemoryProvider(), RunOptions(concurrency=2), trials=1, out=tmp_path / "b"
    )
    assert _session(via_evaluate.run_dir)["concurrency"] == 2


def test_what_is_not_asked_comes_from_defaults(tmp_path: Path) -> None:
    result = evaluate_provider(ScriptedArm(), InMemoryProvider(), runs_root=tmp_path / "runs")
    assert result.run_dir == tmp_path / "runs" / result.run_id
    started = _session(result.run_dir)
    assert started["plan"]["trials"] == DEFAULTS.trials
    assert started["concurrency"] == DEFAULTS.concurrency
    assert started["min_coverage"] == DEFAULTS.min_coverage
    assert "from_provider" not in started  # a provider that recommends nothing
    assert RunRequest().settled().provider == DEFAULTS.provider
    assert RunRequest().settled().arms == DEFAULTS.arms
    options = RunOptions()
    assert (options.concurrency, options.provider_timeout) == (
        DEFAULTS.concurrency,
        DEFAULTS.provider_timeout,
    )


def test_a_bad_option_is_a_run_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="concurrency must be an integer") as caught:
        _execute(provider=InMemoryProvider(), arms=[ScriptedArm()], concurrency=0)
    assert isinstance(caught.value.__cause__, OptionsError)
    assert caught.value.__cause__.option == "concurrency"
    assert not any(tmp_path.iterdir())


def test_the_providers_recommendations_apply_when_nothing_is_asked(tmp_path: Path) -> None:
    provider = RecommendingProvider(("ok", "provision_hangs"))
    result = evaluate_provider(ScriptedArm(), provider, trials=1, out=tmp_path / "run")
    started = _session(result.run_dir)
    assert started["concurrency"] == 2
    assert started["from_provider"] == {"concurrency": 2, "provider_timeout": 0.5}
    assert _failure_reasons(result.run_dir) == ["provision did not finish within 0.5s"]


def test_a_given_value_wins_over_the_recommendation(tmp_path: Path) -> None:
    provider = RecommendingProvider(("ok", "provision_hangs"))
    result = evaluate_provider(
        ScriptedArm(),
        provider,
        trials=1,
        out=tmp_path / "run",
        concurrency=5,
        provider_timeout=0.25,
    )
    started = _session(result.run_dir)
    assert started["concurrency"] == 5 and "from_provider" not in started
    assert _failure_reasons(result.run_dir) == ["provision did not finish within 0.25s"]


def test_a_resume_keeps_its_recorded_concurrency_over_the_recommendation(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    evaluate_provider(
        ScriptedArm(), RecommendingProvider(("ok",)), trials=3, out=run_dir, concurrency=3
    )
    log = run_dir / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:2]))  # run.started and one episode's first event
    again = RunRequest(
        resume=run_dir, provider=RecommendingProvider(("ok",)), arms=(ScriptedArm(),)
    )
    resumed = _execute(again)
    assert resumed.metrics["arms"]["scripted"]["n_episodes"] == 3
    session = _session(run_dir, "run.resumed")
    assert session["concurrency"] == 3
    assert session["from_provider"] == {"provider_timeout": 0.5}


def test_resume_reconciliation_refuses_in_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    evaluate_provider(ScriptedArm(), InMemoryProvider(), trials=2, out=run_dir)
    with pytest.raises(RunError, match="does not exist; check the path given to --resume"):
        _execute(RunRequest(resume=tmp_path / "nowhere"))
    with pytest.raises(RunError, match="is a file, not a run directory"):
        _execute(resume=run_dir / "events.jsonl")
    with pytest.raises(RunError, match="holds no events.jsonl"):
        _execute(resume=tmp_path)
    with pytest.raises(RunError, match=r"the plan differs \(.*trials"):
        _execute(resume=run_dir, provider=InMemoryProvider(), arms=[ScriptedArm()], trials=3)
    with pytest.raises(RunError, match="drop --out"):
        RunRequest(resume=run_dir, out=tmp_path / "elsewhere")
    with pytest.raises(RunError, match="cannot be combined with --resume"):
        RunRequest(resume=run_dir, force=True)


def test_the_cli_takes_the_recommendation_unless_given(tmp_path: Path) -> None:
    env = pythonpath_env(TESTS, HERE)
    fake = [
        "--provider",
        "test_api:RecommendingProvider",
        "--arm",
        "effectbench.testing:ScriptedArm",
    ]
    plain = run_cli("run", *fake, "--trials", "1", "--out", "a", "-q", cwd=tmp_path, env=env)
    assert plain.returncode == 0, plain.stderr
    assert _session(tmp_path / "a")["concurrency"] == 2
    given = run_cli(
        "run",
        *fake,
        "--trials",
        "1",
        "--concurrency",
        "7",
        "--out",
        "b",
        "-q",
        cwd=tmp_path,
        env=env,
    )
    assert given.returncode == 0, given.stderr
    started = _session(tmp_path / "b")
    assert started["concurrency"] == 7 and started["from_provider"] == {"provider_timeout": 0.5}
