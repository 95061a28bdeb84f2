"""Browser episodes: episodes/s at concurrency 1, 4, 16 and memory per concurrent context.

Each episode is what `effectbench run --arm browser_screen_only --arm
browser_effect_verified` does on the anchor: a fresh MockMed database and URL token, a
fresh Chromium context and page from the run's pool, the form filled and submitted in
the browser (effect_verified also opens the records page before and after), a PNG
screenshot stored by hash, two oracle reads, teardown. CPU is this process plus its
children (Playwright's driver and every Chromium process, counted once the run's pool
has stopped), so "cpu s/ep" is what one episode costs the machine, whatever its load.

``--cdp``: also the same anchor through an ``exec+browser`` protocol agent
(``cdp_screen_only``, contained as ``--isolate`` contains it) on the harness's CDP
hub, at each ``--cdp`` concurrency.

Memory: N contexts held open on the form page, PSS summed over the driver and every
Chromium process (RSS double-counts shared pages); per context = (PSS at 16 - PSS at 0) / 16.
Targets on a 2-core machine: >= 10 episodes/s at concurrency 16, <= 80 MiB per context.

    .venv/bin/python bench/browser.py [--trials 4] [--runs 1] [--json PATH]
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
from _common import (
    load_line,
    loadavg,
    median,
    parser,
    process_children,
    scheduled_run,
    table,
    write_json,
)
from effectbench_mockmed import MockMedProvider

from effectbench.agents.reference import CdpScreenOnlyArm
from effectbench.arms.browser import BrowserEffectVerifiedArm, BrowserScreenOnlyArm
from effectbench.browser import CHROMIUM_ENV, BrowserPool, find_chromium
from effectbench.core.arm import Arm

TARGET_EPS_AT_16 = 10.0
TARGET_MIB_PER_CONTEXT = 80.0


def _subreaper() -> None:
    """Orphaned descendants (Chromium's zygote and the renderers it reaped) become our
    children, so their CPU reaches ``os.times`` once ``_reap`` has waited for them."""
    import ctypes

    ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _cpu() -> float:
    _reap()
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _pool_arms() -> dict[str, Arm]:
    return {
        "browser_screen_only": BrowserScreenOnlyArm(),
        "browser_effect_verified": BrowserEffectVerifiedArm(),
    }


def _cdp_arms() -> dict[str, Arm]:
    return {"cdp_screen_only": CdpScreenOnlyArm().with_isolation(True)}


def run_once(
    trials: int, concurrency: int, arms: dict[str, Arm] | None = None
) -> tuple[float, float, int]:
    """(wall s, CPU s of the harness and every browser process, episodes) of one run."""
    arms = _pool_arms() if arms is None else arms
    provider = MockMedProvider()
    return scheduled_run(provider, provider.tasks(), arms, trials, concurrency, _cpu, _settle)


def _settle(deadline_s: float = 10.0) -> None:
    """Wait (bounded) until the stopped browsers' processes have all exited."""
    end = time.monotonic() + deadline_s
    while _tree(os.getpid()) and time.monotonic() < end:
        _reap()
        time.sleep(0.05)


def _run_with(
    executable: str | None, trials: int, concurrency: int, arms: dict[str, Arm] | None = None
) -> tuple[float, float, int]:
    saved = os.environ.get(CHROMIUM_ENV)
    if executable is not None:
        os.environ[CHROMIUM_ENV] = executable
    try:
        return run_once(trials, concurrency, arms)
    finally:
        os.environ.pop(CHROMIUM_ENV, None)
        if saved is not None:
            os.environ[CHROMIUM_ENV] = saved


def _tree(root: int) -> list[int]:
    kids = process_children()
    found, frontier = [], [root]
    while frontier:
        below = kids.get(frontier.pop(), [])
        found += below
        frontier += below
    return found


def _memory_kib(pids: list[int]) -> tuple[int, int]:
    """(PSS, RSS) in KiB summed over ``pids``."""
    pss = rss = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("Pss:"):
                pss += int(line.split()[1])
            elif line.startswith("Rss:"):
                rss += int(line.split()[1])
    return pss, rss


async def _memory(counts: list[int]) -> list[dict[str, Any]]:
    provider = MockMedProvider()
    await provider.start()
    pool = BrowserPool()
    await pool.start()
    task = provider.tasks()[0]
    rows = []
    try:
        for n in counts:
            opened, episodes = [], []
            for _ in range(n):
                episode = await provider.provision(task, 0, {"note": "x", "record_key": "k"})
                browser = await pool.open()
                await browser.page.goto(episode.env.channels["base_url"])
                opened.append(browser)
                episodes.append(episode)
            await anyio.sleep(1.0)  # let renderers settle after the load
            pss, rss = _memory_kib(_tree(os.getpid()))
            rows.append({"contexts": n, "pss_mib": pss / 1024, "rss_mib": rss / 1024})
            for b in opened:
                await b.close()
            for e in episodes:
                await e.teardown()
    finally:
        await pool.stop()
        await provider.stop()
    return rows


def _measure(
    exe: str | None, concurrency: int, cdp: bool, trials: int, runs: int
) -> dict[str, Any]:
    """One row: the median of ``runs`` runs of the pool's arms, or of the CDP agent."""
    walls, cpus, n = [], [], 0
    for _ in range(runs):
        wall, cpu, n = _run_with(exe, trials, concurrency, _cdp_arms() if cdp else None)
        walls.append(wall)
        cpus.append(cpu)
    w, c = median(walls), median(cpus)
    label = "before: " + exe if exe else os.path.basename(find_chromium())
    return {
        "browser": "cdp hub: " + label if cdp else label,
        "concurrency": concurrency, "episodes": n, "wall_s": walls, "median_wall_s": w,
        "episodes_per_s": n / w, "cpu_s_per_episode": c / n,
        "cpu_bound_episodes_per_s": (os.cpu_count() or 1) / (c / n),
    }  # fmt: skip


def main() -> None:
    ap = parser(__doc__)
    ap.set_defaults(runs=1)
    ap.add_argument("--trials", type=int, default=4, help="trials per task (9 tasks, 2 arms)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument(
        "--cdp",
        type=int,
        nargs="*",
        default=[4, 16],
        help="concurrencies of the exec+browser (CDP hub) rows; none to skip",
    )
    ap.add_argument(
        "--before",
        default="chromium",
        help="the executable of the 'before' row at concurrency 16 ('' to skip)",
    )
    args = ap.parse_args()
    _subreaper()
    start_load = loadavg()
    rows = []
    cases: list[tuple[str | None, int, bool]] = [(None, conc, False) for conc in args.concurrency]
    if args.before:
        cases.insert(0, (args.before, 16, False))
    cases += [(None, conc, True) for conc in args.cdp]
    for exe, conc, cdp in cases:
        rows.append(_measure(exe, conc, cdp, args.trials, args.runs))
    memory = anyio.run(_memory, [0, 1, 4, 16])
    base, top = memory[0], memory[-1]
    per_context = (top["pss_mib"] - base["pss_mib"]) / max(1, top["contexts"])
    print(
        f"Browser episodes (MockMed anchor, both browser arms), median of {args.runs} "
        f"({load_line()})"
    )
    print(table(
        ["browser", "concurrency", "episodes", "wall s", "episodes/s", "cpu s/ep",
         "cpu-bound eps/s"],
        [[r["browser"], r["concurrency"], r["episodes"], r["median_wall_s"], r["episodes_per_s"],
          r["cpu_s_per_episode"], r["cpu_bound_episodes_per_s"]] for r in rows],
    ))  # fmt: skip
    print(table(
        ["contexts", "PSS MiB", "RSS MiB"],
        [[m["contexts"], m["pss_mib"], m["rss_mib"]] for m in memory],
    ))  # fmt: skip
    for r in rows:
        if r["concurrency"] == 16 and not r["browser"].startswith(("before", "cdp")):
            ok = r["episodes_per_s"] >= TARGET_EPS_AT_16
            print(f"target >= {TARGET_EPS_AT_16:.0f} episodes/s at 16: {r['episodes_per_s']:.2f} "
                  f"({'met' if ok else 'MISSED'})")  # fmt: skip
    ok = per_context <= TARGET_MIB_PER_CONTEXT
    print(f"target <= {TARGET_MIB_PER_CONTEXT:.0f} MiB PSS per context: {per_context:.1f} "
          f"({'met' if ok else 'MISSED'})")  # fmt: skip
    write_json(
        args.json, "browser",
        {"targets": {"episodes_per_s_at_16": TARGET_EPS_AT_16,
                     "mib_per_context": TARGET_MIB_PER_CONTEXT},
         "throughput": rows, "memory": memory, "pss_mib_per_context": per_context},
        start_load,
    )  # fmt: skip


if __name__ == "__main__":
    main()
