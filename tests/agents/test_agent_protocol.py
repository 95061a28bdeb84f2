"""The agent protocol: messages against the shipped schema, and every way an agent process
can misbehave failing only its own episode, in both process modes (real subprocesses)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from schema_check import _check

from effectbench.agents import ExecArm, protocol
from effectbench.agents.reference import PYTHON_AGENT
from effectbench.arm import TaskView
from effectbench.log.reader import read_log
from effectbench.model import AgentReport
from effectbench.provider import EnvHandle, PageViewport
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.schema import load_agent_protocol_schema
from effectbench.testing import InMemoryProvider

SCRIPTED = Path(__file__).resolve().parents[1] / "agents" / "scripted_agent.py"
INFO = ProviderInfo("fake", "1.0")
TIMEOUT_S = 4.0


def _arm(mode: str, **kw: Any) -> ExecArm:
    return ExecArm(
        [sys.executable, str(SCRIPTED)], name="agent", mode=mode, timeout_s=TIMEOUT_S, **kw
    )  # type: ignore[arg-type]


def _run(tmp_path: Path, arm: ExecArm, behaviours: tuple[str, ...], concurrency: int) -> list[Any]:
    provider = InMemoryProvider(behaviours)
    plan = build_plan(INFO, provider.tasks(), [arm.name], 1)
    options = SchedulerOptions(concurrency=concurrency)
    sched = Scheduler(plan, provider, {arm.name: arm}, tmp_path, run_id="r", options=options)
    outcome = anyio.run(sched.run)
    assert not outcome.interrupted
    assert outcome.finished + outcome.failed == len(behaviours)
    return list(read_log(tmp_path / "events.jsonl"))


def _ends(events: list[Any]) -> dict[str, str]:
    """behaviour -> "finished" or "<failure class>: <error>"."""
    out = {}
    for e in events:
        if e.type == "episode.finished":
            out[e.ep.split("::")[-2]] = "finished"
        elif e.type == "episode.failed":
            out[e.ep.split("::")[-2]] = f"{e.data['failure_class']}: {e.data['error']}"
    return out


# --------------------------------------------------------------------------- schema

SCHEMA = load_agent_protocol_schema()


def _valid(message: Any) -> bool:
    return not _check(SCHEMA, message, SCHEMA)


def test_harness_messages_match_the_schema() -> None:
    task = InMemoryProvider(("ok",)).tasks()[0]
    view = TaskView.of(task, 3, episode_id="a::fake::ok::t3")
    line = protocol.episode_line(view, {"base_url": "http://127.0.0.1:1/e/x/"}, 12.5)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    message = orjson.loads(line)
    assert _valid(message), _check(SCHEMA, message, SCHEMA)
    assert message["task"]["params"] == dict(view.params) and message["timeout_s"] == 12.5
    assert _valid(orjson.loads(protocol.episode_line(view, {}, None)))
    assert _valid(orjson.loads(protocol.cancel_line("a::fake::ok::t3", "deadline")))


def test_screenshot_answers_and_the_browser_viewport_match_the_schema() -> None:
    task = InMemoryProvider(("ok",)).tasks()[0]
    view = TaskView.of(task, 0, episode_id="a::fake::ok::t0")
    cdp = "ws://127.0.0.1:9/devtools/browser/tok"
    line = protocol.episode_line(view, {}, 1.0, cdp, PageViewport(1024, 720, 2.0))
    message = orjson.loads(line)
    assert _valid(message), _check(SCHEMA, message, SCHEMA)
    viewport = {"width": 1024, "height": 720, "device_scale_factor": 2.0}
    assert message["browser"]["viewport"] == viewport
    ok = {"ok": True, "sha256": "0" * 64, "bytes": 9, "width": 2, "height": 1, "label": "x",
          "kept": True, "png_base64": "iVBORw0K"}  # fmt: skip
    for answer in (ok, {"ok": False, "error": "screenshots are off"}):
        for ident in ("r1", 7, None):
            said = orjson.loads(protocol.screenshot_result("a::fake::ok::t0", ident, answer))
            assert _valid(said), _check(SCHEMA, said, SCHEMA)
            assert said.get("id") == ident


GOOD = [
    {
        "type": "report",
        "episode_id": "e",
        "reported_success": True,
        "halted": False,
        "message": "m",
    },
    {"type": "report", "episode_id": "e", "reported_success": False, "halted": True},
    {"type": "action", "episode_id": "e", "kind": "click", "detail": {"x": 1, "y": None}},
    {"type": "action", "episode_id": "e", "kind": "click"},
    {"type": "model_call", "episode_id": "e", "input_tokens": 3, "cost_usd": None},
    {"type": "error", "episode_id": "e", "message": "gave up"},
    {"type": "screenshot", "episode_id": "e"},
    {"type": "screenshot", "episode_id": "e", "id": 3, "label": "filled form", "image": True},
    {"type": "screenshot", "episode_id": "e", "id": "s1", "image": False},
]
BAD = [
    {"type": "report", "episode_id": "e", "reported_success": "yes", "halted": False},
    {"type": "report", "episode_id": "e", "reported_success": True},
    {"type": "report", "episode_id": "e", "reported_success": True, "halted": False, "extra": 1},
    {"type": "action", "episode_id": "e", "kind": ""},
    {"type": "action", "episode_id": "e", "kind": "k", "detail": {"x": [1]}},
    {"type": "model_call", "episode_id": "e", "input_tokens": -1},
    {"type": "model_call", "episode_id": "e", "input_tokens": 1.5},
    {"type": "telemetry", "episode_id": "e"},
    {"type": "screenshot", "episode_id": "e", "image": "yes"},
    {"type": "screenshot", "episode_id": "e", "label": "x" * 201},
    {"type": "screenshot", "episode_id": "e", "id": 1.5},
    {"type": "screenshot", "episode_id": "e", "id": True},
    {"type": "screenshot", "episode_id": "e", "page": "other"},
]


@pytest.mark.parametrize("message", GOOD)
def test_the_harness_accepts_what_the_schema_accepts(message: dict[str, Any]) -> None:
    assert _valid(message) and protocol.problem(message) is None


@pytest.mark.parametrize("message", BAD)
def test_the_harness_refuses_what_the_schema_refuses(message: dict[str, Any]) -> None:
    assert not _valid(message) and protocol.problem(message) is not None


def test_the_reference_agent_speaks_the_schema(tmp_path: Path) -> None:
    """Every line the Python reference agent writes for a real episode is schema-valid."""
    from effectbench_mockmed import MockMedProvider

    lines: list[bytes] = []

    async def main() -> None:
        provider = MockMedProvider(tmp_root=tmp_path)
        await provider.start()
        try:
            task = provider.tasks()[0]
            view = TaskView.of(task, 0, episode_id="x::mockmed::ok::t0")
            ep = await provider.provision(task, 0, dict(view.params))
            episode = protocol.episode_line(view, ep.env.channels, 30.0)
            with anyio.fail_after(60):
                proc = await anyio.run_process(
                    ["/usr/bin/python3", str(PYTHON_AGENT)], input=episode, check=True
                )
            lines.extend(proc.stdout.splitlines())
            await ep.teardown()
        finally:
            await provider.stop()

    anyio.run(main)
    messages = [orjson.loads(x) for x in lines]
    assert [m["type"] for m in messages] == ["action", "report"]
    assert all(_valid(m) for m in messages) and messages[-1]["reported_success"] is True


# --------------------------------------------------------------------------- failure modes

PER_EPISODE = {
    "report": "finished",
    "not_json": "agent: arm 'agent' raised AgentMalformed: the agent wrote a line that is not JSON",
    "bad_report": (
        "agent: arm 'agent' raised AgentMalformed: the agent sent a malformed message: report "
        "reported_success must be true or false"
    ),
    "unknown": (
        "agent: arm 'agent' raised AgentMalformed: the agent wrote a 'report' message for "
        "unknown episode 'someone-else::fake::x::t0'"
    ),
    "crash": (
        "agent: arm 'agent' raised AgentExited: the agent process exited with code 3 before it "
        "reported"
    ),
    "killed": (
        "agent: arm 'agent' raised AgentExited: the agent process was killed by signal 9 before "
        "it reported"
    ),
    "exit": (
        "agent: arm 'agent' raised AgentExited: the agent process exited with code 0 before it "
        "reported"
    ),
    "hang": (
        f"agent: arm 'agent' raised AgentTimeout: the agent sent no report within {TIMEOUT_S:g}s"
    ),
    "close_stdout": (
        "agent: arm 'agent' raised AgentExited: the agent process closed its stdout before it "
        "reported"
    ),
    "flood": (
        "agent: arm 'agent' raised AgentMalformed: the agent wrote a line longer than 1048576 bytes"
    ),
    "error": (
        "agent: arm 'agent' raised AgentGaveUp: the agent gave up on the episode: the form "
        "never loaded"
    ),
    "actions": "agent: arm 'agent' raised AgentMalformed: the agent sent more than 10000 actions",
}


def test_each_misbehaviour_fails_only_its_episode_with_one_process_each(tmp_path: Path) -> None:
    arm = _arm("per_episode", isolate=False)
    events = _run(tmp_path, arm, tuple(PER_EPISODE), concurrency=len(PER_EPISODE))
    ends = _ends(events)
    for how, expected in PER_EPISODE.items():
        assert ends[how].startswith(expected), (how, ends[how])
    assert arm.processes_started == len(PER_EPISODE)
    ep = "agent::fake::report::t0"
    actions = [e.data for e in events if e.type == "episode.action" and e.ep == ep]
    assert actions == [{"kind": "submit_form", "detail": {"status": 200}}]
    (telemetry,) = [e.data for e in events if e.type == "episode.telemetry" and e.ep == ep]
    assert telemetry == {
        "model_calls": 1, "input_tokens": 12, "output_tokens": 3, "cost_usd": 0.001, "actions": 1,
        "model_latency_ms": 40.5, "cost_source": "arm", "model_call_latency_ms": [40.5],
    }  # fmt: skip


SHARED = {
    "report": "finished",
    "not_json": "finished",  # the stray line names no episode: dropped, counted
    "bad_report": "agent: arm 'agent' raised AgentMalformed: the agent sent a malformed message",
    "unknown": (
        f"agent: arm 'agent' raised AgentTimeout: the agent sent no report within {TIMEOUT_S:g}s"
    ),
    "crash": (
        "agent: arm 'agent' raised AgentExited: the agent process exited with code 3 before it "
        "reported"
    ),
    "flood": "finished",
    "exit": "agent: arm 'agent' raised AgentExited: the agent process exited with code 0",
    "hang": (
        f"agent: arm 'agent' raised AgentTimeout: the agent sent no report within {TIMEOUT_S:g}s"
    ),
    "error": "agent: arm 'agent' raised AgentGaveUp: the agent gave up on the episode",
    "actions": "agent: arm 'agent' raised AgentMalformed: the agent sent more than 10000 actions",
}


def test_a_long_lived_process_survives_misbehaviour_and_is_restarted_after_a_crash(
    tmp_path: Path,
) -> None:
    """Concurrency 1, so a crash has exactly one episode in flight to take down; the
    report-writing episodes after it prove the run, and a restarted process, go on."""
    order = ("report", *[h for h in SHARED if h != "report"], "report2")
    arm = _arm("shared", isolate=False)
    events = _run(tmp_path, arm, order, concurrency=1)
    ends = _ends(events)
    for how, expected in SHARED.items():
        assert ends[how].startswith(expected), (how, ends[how])
    assert ends["report2"] == "finished"
    assert arm.processes_started == 3  # the first, after the crash, after the early exit
    assert arm.stray_lines >= 3  # not JSON, the unknown episode's report, the long line
    started = events[0].data
    assert started["execution"] == {"agent": "subprocess"}


def test_a_shared_arm_outside_a_lifespan_says_how_to_use_it() -> None:
    arm = _arm("shared", isolate=False)
    task = InMemoryProvider(("report",)).tasks()[0]
    view = TaskView.of(task, 0, episode_id="agent::fake::report::t0")

    async def main() -> AgentReport:
        return await arm.run(view, EnvHandle(channels={}))

    with pytest.raises(RuntimeError, match="lifespan"):
        anyio.run(main)


def test_an_agent_that_cannot_start_fails_its_episode(tmp_path: Path) -> None:
    arm = ExecArm(
        [str(tmp_path / "no-such-agent")], name="agent", mode="per_episode", isolate=False
    )
    ends = _ends(_run(tmp_path, arm, ("report",), concurrency=1))
    assert ends["report"].startswith(
        "agent: arm 'agent' raised AgentStartFailed: cannot start the agent"
    )


def test_exec_specs_name_the_script_and_version_its_bytes(tmp_path: Path) -> None:
    from effectbench.run.registry import Registry

    script = tmp_path / "my_agent.js"
    script.write_text("// v1\n")
    arm = Registry().arm(f"exec:node {script}")
    assert isinstance(arm, ExecArm) and arm.name == "exec:my_agent"
    assert arm.argv == ("node", str(script)) and arm.mode == "shared"
    before = arm.version
    script.write_text("// v2\n")
    assert ExecArm.from_spec(f"exec:node {script}").version != before
    with pytest.raises(Exception, match="needs a command line"):
        Registry().arm("exec:")


def test_exec_each_runs_one_process_per_episode(tmp_path: Path) -> None:
    arm = ExecArm.from_spec(f"exec-each:{sys.executable} {SCRIPTED}")
    assert arm.mode == "per_episode" and arm.name == "exec-each:scripted_agent"
    arm = arm.with_isolation(False)
    ends = _ends(_run(tmp_path, arm, ("report", "report2", "report3"), concurrency=3))
    assert set(ends.values()) == {"finished"} and arm.processes_started == 3
