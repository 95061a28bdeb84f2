"""CDP endpoints for protocol agents: one episode's context only, gone at teardown.

The hub is real (a pipe-driven Chromium and the filtering WebSocket proxy on
127.0.0.1); clients are Playwright's ``connect_over_cdp`` and the reference agent's own
stdlib CDP client, so what is refused is refused by the proxy, not by a client."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import orjson
import pytest
from schema_check import _check

from effectbench.agents import protocol
from effectbench.agents.exec import ExecArm
from effectbench.agents.reference.cdp_screen_only import Cdp  # its stdlib CDP client
from effectbench.api import evaluate
from effectbench.arm import TaskView
from effectbench.browser import cdp_proxy
from effectbench.browser.cdp_proxy import CdpEpisode, CdpHub
from effectbench.browser.policy import OriginPolicy
from effectbench.schema import load_agent_protocol_schema
from effectbench.testing import InMemoryProvider

SCHEMA = load_agent_protocol_schema()

pytestmark = pytest.mark.timeout(300)
AGENT = Path(__file__).resolve().parents[1] / "agents" / "cdp_failing_agent.py"
NOWHERE = OriginPolicy(frozenset())  # these episodes load no product: about:blank only


def test_the_episode_message_carries_the_endpoint_and_matches_the_schema() -> None:
    view = TaskView.of(InMemoryProvider(("ok",)).tasks()[0], 0, episode_id="a::fake::ok::t0")
    url = "ws://127.0.0.1:4100/devtools/browser/AbC-_9"
    message = orjson.loads(protocol.episode_line(view, {}, 5.0, url))
    assert message["browser"] == {"cdp_url": url, "http_url": "http" + url.removeprefix("ws")}
    assert not _check(SCHEMA, message, SCHEMA)
    assert "browser" not in orjson.loads(protocol.episode_line(view, {}, 5.0))
    message["browser"]["cdp_url"] = "ws://10.0.0.1:4100/devtools/browser/x"
    assert _check(SCHEMA, message, SCHEMA)


def _refused(cdp: Cdp, method: str, params: dict[str, Any] | None = None, **kw: Any) -> str:
    with pytest.raises(RuntimeError) as info:
        cdp.call(method, params, **kw)
    return str(info.value)


def _own_page(cdp: Cdp) -> tuple[list[str], str]:
    targets = [t["targetId"] for t in cdp.call("Target.getTargets")["targetInfos"]]
    session = cdp.call("Target.attachToTarget", {"targetId": targets[0], "flatten": True})
    return targets, session["sessionId"]


def _isolation_checks(a: CdpEpisode, b: CdpEpisode) -> None:
    """Blocking raw-CDP checks, run in a thread while the hub serves."""
    ca, cb = Cdp(a.url), Cdp(b.url)
    targets_a, session_a = _own_page(ca)
    targets_b, session_b = _own_page(cb)
    assert a.target_id in targets_a and len(targets_a) == 2  # and the page Playwright opened
    assert targets_b == [b.target_id]
    created = cb.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    cb.call("Target.attachToTarget", {"targetId": created, "flatten": True})  # its own, at once
    assert [t["targetId"] for t in ca.call("Target.getTargets")["targetInfos"]] == targets_a
    assert "not a target of this episode" in _refused(
        ca, "Target.attachToTarget", {"targetId": created, "flatten": True}
    )
    assert "not a target of this episode" in _refused(
        ca, "Target.closeTarget", {"targetId": b.target_id}
    )
    assert "no session" in _refused(ca, "Runtime.evaluate", {"expression": "1"}, session=session_b)
    assert ca.call("Target.getBrowserContexts")["browserContextIds"] == [a.context_id]
    for method in ("Target.createBrowserContext", "Browser.close"):
        assert "not allowed" in _refused(ca, method)
    assert "not this episode's browser context" in _refused(
        ca, "Target.disposeBrowserContext", {"browserContextId": b.context_id}
    )
    assert "not this episode's" in _refused(
        ca, "Storage.getCookies", {"browserContextId": b.context_id}
    )
    assert "not allowed" in _refused(ca, "Target.attachToBrowserTarget", session=session_a)
    # a browser session of its own (tests/browser/test_cdp_sessions.py): the same rules hold on it
    extra = ca.call("Target.attachToBrowserTarget")["sessionId"]
    assert "not allowed" in _refused(ca, "Target.createBrowserContext", session=extra)
    assert "not a target of this episode" in _refused(
        ca, "Target.attachToTarget", {"targetId": b.target_id, "flatten": True}, session=extra
    )
    # fresh storage per episode: a cookie set in A is not in B
    cookie = {"name": "who", "value": "A", "domain": "127.0.0.1", "path": "/"}
    ca.call("Network.setCookie", cookie, session=session_a)
    assert [c["value"] for c in ca.call("Storage.getCookies")["cookies"]] == ["A"]
    assert cb.call("Storage.getCookies")["cookies"] == []
    ca.ws.close()
    cb.ws.close()


async def _playwright_sees_only_its_page(a: CdpEpisode, b: CdpEpisode) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser_b = await pw.chromium.connect_over_cdp(b.url)
        await browser_b.contexts[0].pages[0].set_content("<title>episode B</title>")
        browser_a = await pw.chromium.connect_over_cdp(a.url)
        pages = [p for c in browser_a.contexts for p in c.pages]
        assert len(pages) == 1 and pages[0].url == "about:blank"
        second = await browser_a.contexts[0].new_page()  # lands in A's own context
        assert len(browser_a.contexts[0].pages) == 2 and second.url == "about:blank"
        assert [await p.title() for p in browser_b.contexts[0].pages] == ["episode B"]
        await browser_a.close()
        await browser_b.close()


def test_an_episode_endpoint_reaches_only_its_own_context() -> None:
    async def main() -> None:
        hub = CdpHub()
        await hub.start()
        try:
            a, b = await hub.open(NOWHERE), await hub.open(NOWHERE)
            assert a.url != b.url and a.context_id != b.context_id
            await _playwright_sees_only_its_page(a, b)
            await anyio.to_thread.run_sync(_isolation_checks, a, b)
            live = await anyio.to_thread.run_sync(Cdp, a.url)
            await hub.close(a)
            with pytest.raises(ConnectionError):  # the open connection is dropped
                await anyio.to_thread.run_sync(live.call, "Target.getTargets")
            with pytest.raises(ConnectionError, match="404"):  # and the URL opens nothing
                await anyio.to_thread.run_sync(Cdp, a.url)
            contexts = (await hub.pipe.call("Target.getBrowserContexts"))["browserContextIds"]
            assert a.context_id not in contexts and b.context_id in contexts
            await hub.close(b)
            assert hub.open_episodes == 0
        finally:
            await hub.stop()

    anyio.run(main)


def test_the_reference_cdp_agent_reproduces_browser_screen_only(tmp_path: Path) -> None:
    """The anchor's pinned figures of browser_screen_only, one trial (SWER 5/9 is the
    per-trial half of 50/90), through an isolated process on the CDP endpoint."""
    run = evaluate(["cdp_screen_only"], trials=1, concurrency=4, out=tmp_path / "run")
    metrics = orjson.loads((run.run_dir / "metrics.json").read_bytes())["arms"]["cdp_screen_only"]
    assert (metrics["swer"]["numerator"], metrics["swer"]["denominator"]) == (5, 9)
    assert metrics["swer_wrong_write"]["numerator"] == 4
    assert metrics["swer_phantom"]["numerator"] == 1
    counts = metrics["outcome_counts"]
    assert (counts["success"], counts["false_abort"], counts["safe_halt"]) == (2, 1, 1)
    manifest = orjson.loads((run.run_dir / "manifest.json").read_bytes())
    assert manifest["execution"]["cdp_screen_only"] in ("isolated", "subprocess")


class _Recording(CdpHub):
    seen: ClassVar[list[tuple[int, list[str]]]] = []

    async def stop(self) -> None:
        contexts = (await self.pipe.call("Target.getBrowserContexts"))["browserContextIds"]
        type(self).seen.append((self.open_episodes, contexts))
        await super().stop()


@pytest.fixture
def recording_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Recording]]:
    _Recording.seen = []
    monkeypatch.setattr(cdp_proxy, "CdpHub", _Recording)
    yield _Recording


def test_contexts_are_closed_when_the_agent_fails_or_times_out(
    tmp_path: Path, recording_hub: type[_Recording]
) -> None:
    """An agent that connects and then hangs past its deadline, and one that connects
    and gives up: both episodes fail as ``agent``, and no context outlives them."""
    arm = ExecArm(
        [sys.executable, str(AGENT)], name="cdp_failing", browser=True, isolate=False,
        timeout_s=4.0,
    )  # fmt: skip
    run = evaluate(
        [arm], trials=1, task_globs=["mockmed::ok", "mockmed::stale"], out=tmp_path / "r"
    )
    rows = [orjson.loads(x) for x in (run.run_dir / "results.jsonl").read_bytes().splitlines()]
    assert sorted(r["failure_class"] for r in rows) == ["agent", "agent"]
    assert recording_hub.seen == [(0, [])]


@pytest.mark.timeout(120)
def test_a_killed_run_leaves_no_cdp_browser_behind(tmp_path: Path) -> None:
    """The pipe-driven Chromium behind the endpoints dies with a SIGKILLed harness."""
    from processes import _comm, _descendants, _wait_until_gone

    from effectbench.testing import effectbench_command

    out = tmp_path / "run"
    harness = subprocess.Popen(
        [*effectbench_command(), "run", "--arm", "cdp_screen_only", "--trials", "40",
         "--concurrency", "4", "--out", str(out), "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90.0
        browsers: dict[int, int] = {}
        while time.monotonic() < deadline:
            log = out / "events.jsonl"
            if log.exists() and log.read_bytes().count(b'"episode.arm_started"') >= 4:
                tree = _descendants(harness.pid)
                browsers = {pid: t for pid, t in tree.items() if "chrom" in _comm(pid)}
                if len(browsers) >= 3:  # the browser, its zygote and a renderer
                    break
            time.sleep(0.05)
        assert len(browsers) >= 3, browsers
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        survivors = _wait_until_gone(browsers)
        assert survivors == [], [(pid, _comm(pid)) for pid in survivors]
    finally:
        harness.kill()
        harness.wait()


def test_exec_prefixes_ask_for_a_browser_with_plus_browser() -> None:
    """``exec+browser:`` and ``exec-each+browser:`` are the command-line spelling of
    ``browser=True``; the plain prefixes ask for none, and the registry knows all four."""
    from effectbench.agents.exec import EXEC_PREFIXES
    from effectbench.run import registry

    assert set(EXEC_PREFIXES) == set(registry._EXEC_PREFIXES)
    cases = {
        "exec:": ("shared", False),
        "exec-each:": ("per_episode", False),
        "exec+browser:": ("shared", True),
        "exec-each+browser:": ("per_episode", True),
    }
    for prefix, (mode, browser) in cases.items():
        arm = registry.Registry().arm(f"{prefix}{sys.executable} {AGENT}")
        assert isinstance(arm, ExecArm)
        assert (arm.mode, arm.uses_browser_cdp) == (mode, browser), prefix
        assert arm.name == f"{prefix}{AGENT.stem}"
        again = arm.with_isolation(False)
        assert (again.name, again.uses_browser_cdp) == (arm.name, browser)


def test_an_exec_browser_agent_runs_from_the_command_line(tmp_path: Path) -> None:
    """``--arm 'exec-each+browser:python cdp_screen_only.py'`` hands the agent an
    endpoint: it scores the task it can only do in a browser (plain ``exec-each:``
    gives it none, so it halts having done nothing: an over-halt on a good task)."""
    from effectbench.agents.reference import CDP_AGENT
    from effectbench.testing import run_cli

    rows = {}
    for prefix in ("exec-each+browser:", "exec-each:"):
        out = tmp_path / prefix.strip(":+")
        done = run_cli(
            "run", "--arm", f"{prefix}{sys.executable} {CDP_AGENT}", "--task", "mockmed::ok",
            "--trials", "1", "--out", str(out), "-q", timeout=240,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        (line,) = (out / "results.jsonl").read_bytes().splitlines()
        rows[prefix] = orjson.loads(line)
    assert rows["exec-each+browser:"]["outcome"] == "SUCCESS"
    assert rows["exec-each:"]["outcome"] == "OVER_HALT"
