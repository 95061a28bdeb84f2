"""The computer_use arm over real Chromium against the deterministic stand-in model.

One MockMed run (9 tasks, one trial) holds each scripted model as its own arm: the
script that trusts the banner must score screen_only's figures (SWER 5/9 on one trial:
50/90 over ten), the one that checks the records page effect_verified's (0/9). The
stand-in computes every coordinate from the rendered page's element boxes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from effectbench_mockmed import PINNED
from run_files import log_events, results_by_mode

from effectbench.api import evaluate_provider_async
from effectbench.arms.computer_use import (
    Budget,
    ComputerUseArm,
    ComputerUseNotConfigured,
    RetryPolicy,
    Viewport,
)
from effectbench.arms.computer_use.actions import (
    ActionError,
    Click,
    Done,
    Key,
    Scroll,
    normalise_combo,
    parse_action,
)
from effectbench.serve import LocalServer
from effectbench.testing.computer_use import Sight, StandIn

# one worker runs the module: its fixture is a whole run (~25 s), not worth twice
pytestmark = [pytest.mark.xdist_group("cu-web"), pytest.mark.timeout(600)]
VIEW = Viewport()


async def _run_all(tmp_path: Path) -> dict[str, Any]:
    sight = Sight()
    standin = StandIn(sight)
    local = LocalServer(standin.app)
    await local.start()
    delays: list[float] = []

    async def sleep(seconds: float) -> None:  # records the backoff instead of waiting it out
        delays.append(seconds)

    def arm(model: str, name: str, **kw: Any) -> ComputerUseArm:
        return ComputerUseArm(
            name=name,
            base_url=f"http://127.0.0.1:{local.port}/v1",
            model=model,
            api_key="test-key",
            screen=sight.screen,
            retry=RetryPolicy(max_retries=2, base_s=0.25),
            sleep=sleep,
            environ={},
            **kw,
        )

    try:
        arms = [
            arm("trust-banner", "cu_banner"),
            arm("check-records", "cu_records"),
            arm("flaky-trust-banner-billed", "cu_flaky"),
            arm("trust-banner", "cu_tokens", budget=Budget(max_tokens=1500)),
            arm("trust-banner", "cua_banner", wire_format="anthropic"),
            arm("check-records", "cua_records", wire_format="anthropic"),
        ]
        result = await evaluate_provider_async(
            arms, "mockmed", trials=1, concurrency=4, out=tmp_path / "run", report=False
        )
    finally:
        await local.stop()
    return {
        "dir": result.run_dir,
        "rows": results_by_mode(result.run_dir),
        "events": log_events(result.run_dir),
        "metrics": orjson.loads((result.run_dir / "metrics.json").read_bytes()),
        "delays": delays,
        "standin": standin,
        "sight": sight,
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: dict[str, Any] = anyio.run(_run_all, tmp_path_factory.mktemp("cu"))
    return out


def _rate(block: dict[str, Any]) -> tuple[int, int]:
    return block["numerator"], block["denominator"]


def test_the_banner_script_scores_screen_only_and_the_records_script_effect_verified(
    run: dict[str, Any],
) -> None:
    rows, metrics = run["rows"], run["metrics"]["arms"]
    pairs = [("cu_banner", "screen_only"), ("cu_records", "effect_verified")]
    pairs += [("cua_banner", "screen_only"), ("cua_records", "effect_verified")]
    for arm, pinned in pairs:
        outcomes = {mode: row["outcome"] for mode, row in rows[arm].items()}
        assert outcomes == dict(PINNED[pinned].per_mode), arm
        assert all(r["failure_class"] is None for r in rows[arm].values())
    assert _rate(metrics["cu_banner"]["swer"]) == (5, 9)
    assert _rate(metrics["cu_records"]["swer"]) == (0, 9)
    assert _rate(metrics["cu_flaky"]["swer"]) == (5, 9)


def test_every_request_carries_the_screenshot_and_the_actions_hit_the_page(
    run: dict[str, Any],
) -> None:
    standin: StandIn = run["standin"]
    assert standin.requests
    for body in (b for b in standin.requests if "system" not in b):
        images = [
            part
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for part in m["content"]
            if part.get("type") == "image_url"
        ]
        assert images and images[-1]["image_url"]["url"].startswith("data:image/png;base64,")
        names = {t["function"]["name"] for t in body["tools"]}
        assert {"click", "double_click", "move", "drag", "type", "key", "scroll"} <= names
        assert {"wait", "screenshot", "done"} <= names
    # every screenshot the model was sent was one the stand-in saw taken (none blind)
    assert len(run["sight"]) > 0
    for row in run["rows"]["cu_banner"].values():
        assert "cannot see" not in (row.get("reported_message") or "")


def test_a_throttled_call_is_retried_after_the_endpoints_retry_after(
    run: dict[str, Any],
) -> None:
    assert run["delays"].count(7.0) == 9  # one 429 per conversation, waited as told
    tele = {e["ep"]: e["data"] for e in run["events"] if e["type"] == "episode.telemetry"}
    flaky = [d for ep, d in tele.items() if ep.startswith("cu_flaky::")]
    assert flaky and all(d["cost_usd"] == pytest.approx(0.004 * d["model_calls"]) for d in flaky)
    plain = [d for ep, d in tele.items() if ep.startswith("cu_banner::")]
    assert all(d["input_tokens"] > 0 and d["model_calls"] >= 3 for d in plain)
    assert all(d["cost_usd"] is None for d in plain)  # no price, no reported cost: null


def test_the_token_budget_stops_a_turn_before_its_actions_run(run: dict[str, Any]) -> None:
    """Budget 1500: the first answer costs ~1200 tokens (its image counts 1000), the
    second, with two images, crosses it, so the Save it asks for is never clicked."""
    rows = run["rows"]["cu_tokens"]
    # an episode that failed (no report: None) is named with its failure, not just counted
    odd = {m: (r["reported_success"], r.get("failure_class"), r.get("verdict_reasons"))
           for m, r in rows.items() if r["reported_success"] is not False}  # fmt: skip
    assert not odd, odd
    assert all(r["true_state"] == "ABSENT" for r in rows.values())  # nothing was saved
    by_ep: dict[str, list[dict[str, Any]]] = {}
    for e in run["events"]:
        if str(e["ep"]).startswith("cu_tokens::"):
            by_ep.setdefault(e["ep"], []).append(e)
    assert len(by_ep) == 9
    for events in by_ep.values():
        shots = [e["data"]["sha256"] for e in events if e["type"] == "episode.screenshot"]
        cited = {
            e["data"]["detail"]["screenshot"]
            for e in events
            if e["type"] == "episode.action" and e["data"]["kind"] == "computer"
        }
        assert len(shots) == 2 and cited == {shots[0]}  # only the first turn's actions ran


def test_the_viewport_is_fixed_and_recorded(run: dict[str, Any]) -> None:
    shots = [e["data"] for e in run["events"] if e["type"] == "episode.screenshot"]
    assert shots and all(s["label"].endswith("(1280x800)") for s in shots)
    views = [
        e["data"]["detail"]
        for e in run["events"]
        if e["type"] == "episode.action" and e["data"]["kind"] == "viewport"
    ]
    assert views and all(v == {"width": 1280, "height": 800} for v in views)


def test_actions_are_validated_into_frozen_values() -> None:
    assert parse_action("click", {"x": 10, "y": 20.4}, VIEW) == Click(10, 20, "left")
    assert parse_action("key", {"combo": "ctrl+a"}, VIEW) == Key("Control+a")
    assert parse_action("scroll", {"x": 1, "y": 1, "dy": 300}, VIEW) == Scroll(1, 1, 0, 300)
    assert parse_action("done", {"success": False}, VIEW) == Done(False, "")
    assert normalise_combo("Return") == "Enter" and normalise_combo("shift+Tab") == "Shift+Tab"
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("click", {"x": 1280, "y": 0}, "outside the 1280x800 screen"),
        ("click", {"x": 1, "y": 1, "button": "thumb"}, "button must be"),
        ("click", {"x": "1", "y": 1}, "x must be a number"),
        ("type", {"text": 5}, "text must be a string"),
        ("done", {"success": "yes"}, "success: true or false"),
        ("wait", {"ms": 60_000}, "ms must be 0..10000"),
        ("key", {"combo": "ctrl+"}, "empty or unknown part"),
        ("launch", {}, "unknown action 'launch'"),
    ]
    for name, args, message in bad:
        with pytest.raises(ActionError, match=message):
            parse_action(name, args, VIEW)
    import attrs

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Click(1, 2).x = 3  # type: ignore[misc]


def test_configuration_errors_are_one_line_saying_what_to_set() -> None:
    arm = ComputerUseArm(environ={})
    assert arm.viewport == Viewport(1280, 800)
    with pytest.raises(ComputerUseNotConfigured, match="EFFECTBENCH_CU_BASE_URL"):
        arm.preflight()
    build: list[Callable[[], object]] = [
        lambda: ComputerUseArm(environ={"EFFECTBENCH_CU_VIEWPORT": "big"}),
        lambda: ComputerUseArm(environ={"EFFECTBENCH_CU_FORMAT": "telepathy"}),
    ]
    for make in build:
        with pytest.raises(ComputerUseNotConfigured) as info:
            make()
        assert "\n" not in str(info.value)
    assert ComputerUseArm(environ={"EFFECTBENCH_CU_VIEWPORT": "1024x768"}).viewport == Viewport(
        1024, 768
    )


def test_run_with_the_arm_and_nothing_configured_says_what_to_set(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTBENCH_CU_")}
    listing = subprocess.run(
        [sys.executable, "-m", "effectbench", "arms"],
        check=False, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    assert listing.returncode == 0, listing.stdout + listing.stderr
    row = next(line for line in listing.stdout.splitlines() if line.startswith("computer_use "))
    assert " needs " in row and "set EFFECTBENCH_CU_BASE_URL" in row, row
    proc = subprocess.run(
        [sys.executable, "-m", "effectbench", "run", "--arm", "computer_use",
         "--out", str(tmp_path / "r")],
        check=False, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "set EFFECTBENCH_CU_BASE_URL and EFFECTBENCH_CU_MODEL" in lines[0]
    assert not (tmp_path / "r").exists()


def test_every_screenshot_sent_is_stored_once_and_cited_by_the_actions_it_led_to(
    run: dict[str, Any], tmp_path: Path
) -> None:
    import shutil

    from line_edits import _rechain

    from effectbench.core.evidence import BLOB_DIR
    from effectbench.verify import verify_run

    run_dir: Path = run["dir"]
    logged: dict[str, list[str]] = {}
    for e in run["events"]:
        if e["type"] == "episode.screenshot":
            logged.setdefault(e["ep"], []).append(e["data"]["sha256"])
        elif e["type"] == "episode.action" and e["data"]["kind"] == "computer":
            detail = e["data"]["detail"]
            # the action names the image it was chosen from, logged before it
            assert detail["screenshot"] in logged.get(e["ep"], []), e
            assert "x" in detail or detail["action"] in ("type", "key", "done"), detail
    sent = sum(
        1
        for body in run["standin"].requests
        for m in body["messages"][-1:]
        if m.get("role") == "user"
    )
    sent -= len(run["standin"].throttled)  # a throttled request is sent again, same image
    assert sum(len(v) for v in logged.values()) == sent > 0  # every image sent is logged
    stored = {p.stem for p in (run_dir / BLOB_DIR).iterdir()}
    assert stored == {s for shots in logged.values() for s in shots}  # once per content
    assert verify_run(run_dir).ok

    copy = tmp_path / "dropped"
    shutil.copytree(run_dir, copy)
    lines = (copy / "events.jsonl").read_bytes().splitlines()
    victim = next(
        i for i, ln in enumerate(lines)
        if b'"episode.screenshot"' in ln and b"cu_banner::mockmed::ok" in ln
    )  # fmt: skip
    kept = lines[:victim] + lines[victim + 1 :]
    (copy / "events.jsonl").write_bytes(b"\n".join(_rechain(kept)) + b"\n")
    report = verify_run(copy)
    assert any("that its episode did not log before it" in r for r in report.reasons), (
        report.reasons
    )


def test_the_anthropic_format_sends_the_computer_tool_and_screenshots_in_tool_results(
    run: dict[str, Any],
) -> None:
    from effectbench.arms.computer_use.anthropic_wire import to_action

    bodies = [b for b in run["standin"].requests if "system" in b]
    assert bodies
    for body in bodies:
        computer = body["tools"][0]
        assert computer["type"] == "computer_20250124" and computer["name"] == "computer"
        assert (computer["display_width_px"], computer["display_height_px"]) == (1280, 800)
        last = body["messages"][-1]
        assert last["role"] == "user"
        blocks = last["content"]
        if blocks[0]["type"] == "tool_result":  # a later turn: results, image in the last
            assert all(b["tool_use_id"].startswith("toolu_") for b in blocks)
            images = [i for i in blocks[-1]["content"] if i["type"] == "image"]
        else:
            images = [i for i in blocks if i["type"] == "image"]
        assert images and images[0]["source"]["media_type"] == "image/png"
    assert to_action({"action": "left_click", "coordinate": [3, 4]}) == (
        "click", {"x": 3, "y": 4, "button": "left"}
    )  # fmt: skip
    scroll = {"action": "scroll", "coordinate": [1, 2], "scroll_direction": "up"}
    assert to_action({**scroll, "scroll_amount": 3}) == (
        "scroll", {"x": 1, "y": 2, "dx": 0, "dy": -300}
    )  # fmt: skip
    drag = {"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [5, 6]}
    assert to_action(drag) == ("drag", {"x": 1, "y": 2, "to_x": 5, "to_y": 6})
    assert to_action({"action": "wait", "duration": 0.5}) == ("wait", {"ms": 500})
    with pytest.raises(ValueError, match="not supported"):
        to_action({"action": "triple_click", "coordinate": [1, 1]})


def test_verify_refuses_an_action_that_cites_a_screenshot_its_episode_had_not_seen(
    run: dict[str, Any], tmp_path: Path
) -> None:
    """Forged citations, rechained so the hash chain holds: an episode's first action made
    to cite an image its episode logs only later, or one only another episode had logged
    by then. Both images are stored, so only the per-episode, logged-before rule tells."""
    import shutil

    from line_edits import _rechain

    from effectbench.verify import verify_run

    lines = (run["dir"] / "events.jsonl").read_bytes().splitlines()
    events = [orjson.loads(ln) for ln in lines]
    shots: dict[str, list[str]] = {}  # each episode's screenshots, in log order
    for e in events:
        if e["type"] == "episode.screenshot":
            shots.setdefault(e["ep"], []).append(e["data"]["sha256"])
    firsts: dict[str, int] = {}  # each episode's first computer action
    for i, e in enumerate(events):
        if e["type"] == "episode.action" and e["data"]["kind"] == "computer":
            firsts.setdefault(e["ep"], i)
    # the last episode to act: other episodes' images were logged before its first action
    ep, first = max(firsts.items(), key=lambda kv: kv[1])
    mine = shots[ep]
    assert events[first]["data"]["detail"]["screenshot"] == mine[0]
    others = {
        e["data"]["sha256"]
        for e in events[:first]
        if e["type"] == "episode.screenshot" and e["ep"] != ep
    } - set(mine)
    later = next(s for s in mine if s != mine[0])
    for n, forged in enumerate((later, min(others))):
        event = orjson.loads(lines[first])
        event["data"]["detail"]["screenshot"] = forged
        copy = tmp_path / f"forged{n}"
        shutil.copytree(run["dir"], copy)
        edited = [*lines[:first], orjson.dumps(event), *lines[first + 1 :]]
        (copy / "events.jsonl").write_bytes(b"\n".join(_rechain(edited)) + b"\n")
        report = verify_run(copy)
        assert any(f"({ep}): action cites screenshot {forged[:16]}" in r for r in report.reasons), (
            report.reasons
        )


def test_the_report_draws_each_click_where_the_action_recorded_it(
    run: dict[str, Any], tmp_path: Path
) -> None:
    """The filmstrip of a computer-use episode: each screenshot the model was sent is a
    frame, and each pointing action is marked on the frame it cites, at its own (x, y)
    in that image's pixels; typed text is a caption."""
    import struct

    from report_html import filmstrip

    from effectbench.report import build_report

    ep = "cu_banner::mockmed::ok::t0"
    report = build_report(run["dir"], tmp_path / "report.html", drill_limit=1, episodes=[ep])
    frames = filmstrip(report, ep)
    acted = [
        e["data"]["detail"]
        for e in run["events"]
        if e["ep"] == ep and e["type"] == "episode.action" and e["data"]["kind"] == "computer"
    ]
    pointed = [d for d in acted if "x" in d]
    assert any(d["action"] == "click" for d in pointed)
    for detail in pointed:
        cited = [f for f in frames if f.attrs["data-sha256"] == detail["screenshot"]]
        png = (run["dir"] / f"blobs/sha256/{detail['screenshot']}.png").read_bytes()
        width, height = struct.unpack(">II", png[16:24])
        assert cited and all(f.image_sha256 == detail["screenshot"] for f in cited)
        assert all(f.view_box == f"0 0 {width} {height}" for f in cited)
        at = (str(detail["x"]), str(detail["y"]))
        marks = [m for f in cited for m in f.marks]
        assert any((m["data-x"], m["data-y"]) == at == (m["cx"], m["cy"]) for m in marks)
    typed = [d["text"] for d in acted if d["action"] == "type"]
    captions = [text for f in frames for kind, text in f.actions if kind == "type"]
    assert typed and len(captions) == len(typed)
    assert all(any(c.endswith(f"type \u201c{t}\u201d") for c in captions) for t in typed)
