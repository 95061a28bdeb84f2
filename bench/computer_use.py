"""The computer-use arm: episodes/s at concurrency 1, 4, 16, and the harness's CPU per turn.

Episodes: the `computer_use` arm (the stand-in's `check-records` script, which opens the
records page, submits and reads back, effect_verified's strategy) on MockMed's anchor
pack over real Chromium, the stand-in model serving chat completions on 127.0.0.1 in
this process. Every turn sends one PNG screenshot of the episode's page. The stand-in
runs in this process too, and reads each page's layout when the screenshot is taken (a
test device, not harness work), so the episode rate is a floor.

Per turn: one MockMed page in one Chromium context at the arm's 1280x800 viewport, and
what the harness does for each screenshot, step by step, `--turns` times: capture
(Playwright's `page.screenshot`), encode (the PNG into the request's image part and the
request body, as the OpenAI wire sends it), hash (sha256) and store (written once by
content hash beside the log). CPU is split by process: this Python process (the
harness), Playwright's Node driver, and Chromium's processes (the capture itself).
Target: the harness (Python plus the driver) adds <= 25 ms CPU per turn beyond
Chromium's own capture.

    .venv/bin/python bench/computer_use.py [--trials 2] [--turns 100] [--json PATH]
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
from _common import load_line, loadavg, median, parser, process_children, table, write_json
from effectbench_mockmed import MockMedProvider

from effectbench.arms.computer_use import ComputerUseArm, Viewport
from effectbench.arms.computer_use.openai_wire import _image
from effectbench.arms.computer_use.screen import PlaywrightScreen
from effectbench.browser import BrowserPool
from effectbench.core.evidence import store_blob
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.serve import LocalServer
from effectbench.testing.computer_use import Sight, StandIn

TARGET_MS_PER_TURN = 25.0
CLK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _split_cpu() -> dict[str, float]:
    """CPU seconds so far: this process, the Node driver, and every other descendant
    (Chromium, its zygotes and renderers, bubblewrap)."""
    kids, out = process_children(), {"python": time.process_time(), "driver": 0.0, "chromium": 0.0}
    todo = list(kids.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        out["driver" if _comm(pid).startswith("node") else "chromium"] += _cpu_s(pid)
    return out


async def _episodes(trials: int, concurrency: int) -> tuple[float, int, int]:
    """(wall s, episodes, model turns) of one run of the arm on the anchor."""
    sight = Sight()
    standin = StandIn(sight)
    local = LocalServer(standin.app)
    await local.start()
    arm = ComputerUseArm(
        name="computer_use", base_url=f"http://127.0.0.1:{local.port}/v1",
        model="check-records", api_key="bench", screen=sight.screen, environ={},
    )  # fmt: skip
    provider = MockMedProvider()
    plan = build_plan(
        ProviderInfo(provider.name, provider.version), provider.tasks(), [arm.name], trials
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sched = Scheduler(
                plan, provider, {arm.name: arm}, Path(tmp), run_id="bench",
                options=SchedulerOptions(concurrency=concurrency),
            )  # fmt: skip
            t0 = time.perf_counter()
            outcome = await sched.run()
            wall = time.perf_counter() - t0
    finally:
        await local.stop()
    if outcome.finished != plan.n_episodes:
        raise SystemExit(f"computer-use bench run did not finish every episode: {outcome}")
    turns = sum(1 for b in standin.requests if "messages" in b)
    return wall, plan.n_episodes, turns


def _encode(png: bytes) -> bytes:
    message = {
        "role": "user",
        "content": [{"type": "text", "text": "The screen now:"}, _image(png)],
    }
    return orjson.dumps({"model": "m", "messages": [message]})


async def _per_turn(turns: int) -> dict[str, Any]:
    """CPU per step of a screenshot turn, by process, over ``turns`` repetitions."""
    provider = MockMedProvider()
    await provider.start()
    pool = BrowserPool(browsers=1)
    await pool.start()
    steps: dict[str, dict[str, float]] = {}
    try:
        task = provider.tasks()[0]
        episode = await provider.provision(task, 0, {"note": "x", "record_key": "k"})
        browser = await pool.open()
        screen = PlaywrightScreen(browser.page, Viewport())
        await screen.open()
        await browser.page.goto(episode.env.channels["base_url"])
        png = await screen.capture()
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp)

            def store() -> None:
                _, rel = store_blob(run_dir, png)
                (run_dir / rel).unlink()  # so every turn writes, as a changed screen does

            work: dict[str, Callable[[], Any]] = {
                "encode": lambda: _encode(png),
                "hash": lambda: hashlib.sha256(png).hexdigest(),
                "store": store,
            }
            before = _split_cpu()
            for _ in range(turns):
                await screen.capture()
            after = _split_cpu()
            steps["capture"] = {k: (after[k] - before[k]) / turns * 1e3 for k in after}
            for name, step in work.items():
                before = _split_cpu()
                for _ in range(turns):
                    step()
                after = _split_cpu()
                steps[name] = {k: (after[k] - before[k]) / turns * 1e3 for k in after}
        await browser.close()
        await episode.teardown()
    finally:
        await pool.stop()
        await provider.stop()
    harness = sum(s["python"] + s["driver"] for s in steps.values())
    chromium = sum(s["chromium"] for s in steps.values())
    return {
        "png_bytes": len(png),
        "steps_ms": steps,
        "harness_ms": harness,
        "chromium_ms": chromium,
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--concurrency", type=int, nargs="*", default=[1, 4, 16])
    args = ap.parse_args()
    start = loadavg()
    rows = []
    for c in args.concurrency:
        walls, episodes, turns = [], 0, 0
        for _ in range(args.runs):
            wall, episodes, turns = anyio.run(_episodes, args.trials, c)
            walls.append(wall)
        w = median(walls)
        rows.append({"concurrency": c, "episodes": episodes, "turns": turns,
                     "median_wall_s": w, "episodes_per_s": episodes / w})  # fmt: skip
    per_turn = anyio.run(_per_turn, args.turns)
    print(f"computer_use (check-records stand-in) on the anchor, {load_line()}")
    print(table(["concurrency", "episodes", "turns", "wall s", "episodes/s"],
                [[r["concurrency"], r["episodes"], r["turns"], r["median_wall_s"],
                  r["episodes_per_s"]] for r in rows]))  # fmt: skip
    size = per_turn["png_bytes"]
    print(f"\nper screenshot turn ({size:,} byte PNG, {args.turns} turns), CPU ms:")
    steps = per_turn["steps_ms"].items()
    print(table(["step", "python", "driver", "chromium"],
                [[k, v["python"], v["driver"], v["chromium"]] for k, v in steps]))  # fmt: skip
    harness, chromium = per_turn["harness_ms"], per_turn["chromium_ms"]
    verdict = "met" if harness <= TARGET_MS_PER_TURN else "MISSED"
    print(f"harness (python + driver) {harness:.2f} ms per turn, Chromium {chromium:.2f} ms: "
          f"target <= {TARGET_MS_PER_TURN:g} ms {verdict}")  # fmt: skip
    write_json(args.json, "computer_use", {"episodes": rows, "per_turn": per_turn}, start)


if __name__ == "__main__":
    main()
