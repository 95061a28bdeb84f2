"""Roundup behind the fault proxy: episodes per second at concurrency 1, 8 and 16, and RSS per live tracker.

Each episode is what `effectbench run --provider roundup` does: copy the pristine
tracker, start the episode's fault proxy and `roundup-server` (thread mode), log in,
open the form, post it through the proxy, follow the redirect, two oracle reads
(SQLite + the message file store), stop the server, delete the copy. The arm is
screen_only over the tasks --task selects (default the 22 on the CSRF-on tracker)
x --trials. Then
--live trackers are provisioned at once and left idle: the RSS of each
roundup-server (VmRSS) and the harness's own growth per episode (proxy, session).

    .venv/bin/python bench/roundup.py [--trials 1] [--runs 1] [--live 8] [--json PATH]
"""  # noqa: E501 (the summary line is the --help description, see bench/_common.py)

from __future__ import annotations

import fnmatch
import resource
import tempfile
import time
from pathlib import Path

import anyio
from _common import load_line, loadavg, median, parser, table, write_json
from effectbench_roundup import RoundupProvider

from effectbench.arms.baselines import ScreenOnlyArm
from effectbench.core.model import trial_params
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions


def run_once(trials: int, concurrency: int, pattern: str) -> tuple[float, int, int]:
    """(wall s, episodes planned, episodes finished) of one run, pristine build excluded."""
    with tempfile.TemporaryDirectory() as tmp:
        provider = RoundupProvider(tmp_root=Path(tmp))
        tasks = [t for t in provider.tasks() if fnmatch.fnmatchcase(t.task_id, pattern)]
        plan = build_plan(
            ProviderInfo(provider.name, provider.version), tasks, ["screen_only"], trials
        )

        async def main() -> tuple[float, int]:
            await provider.start()  # built once per run; not part of the per-episode rate
            (Path(tmp) / "run").mkdir()
            sched = Scheduler(
                plan,
                _Started(provider),
                {"screen_only": ScreenOnlyArm()},
                Path(tmp) / "run",
                run_id="bench",
                options=SchedulerOptions(concurrency=concurrency),
            )
            t0 = time.perf_counter()
            try:
                outcome = await sched.run()
            finally:
                await provider.stop()
            return time.perf_counter() - t0, outcome.finished

        wall, finished = anyio.run(main)
    return wall, plan.n_episodes, finished


class _Started:
    """The provider, already started: the scheduler's start/stop become no-ops."""

    def __init__(self, inner: RoundupProvider) -> None:
        self._inner = inner
        self.name, self.version = inner.name, inner.version

    def tasks(self):  # type: ignore[no-untyped-def]
        return self._inner.tasks()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def provision(self, task, trial, params):  # type: ignore[no-untyped-def]
        return await self._inner.provision(task, trial, params)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _self_rss_mib() -> float:
    return _rss_mib(int(Path("/proc/self/stat").read_text().split()[0]))


def live_rss(n: int) -> dict[str, float]:
    """Provision ``n`` episodes at once, leave them idle, and measure."""

    async def main() -> dict[str, float]:
        with tempfile.TemporaryDirectory() as tmp:
            provider = RoundupProvider(tmp_root=Path(tmp))
            await provider.start()
            task = provider.tasks()[0]
            base = _self_rss_mib()
            episodes = []
            try:
                for trial in range(n):
                    episodes.append(
                        await provider.provision(task, trial, trial_params(task, trial))
                    )
                servers = [_rss_mib(p) for p in provider.live_pids()]
                grown = _self_rss_mib() - base
            finally:
                for ep in episodes:
                    await ep.teardown()
                await provider.stop()
        return {
            "trackers": float(n),
            "server_rss_median_mib": median(servers),
            "server_rss_max_mib": max(servers),
            "harness_growth_per_episode_mib": grown / n,
            "harness_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }

    result: dict[str, float] = anyio.run(main)
    return result


def main() -> None:
    ap = parser(__doc__)
    ap.set_defaults(runs=1)
    ap.add_argument("--trials", type=int, default=1, help="trials per selected task")
    ap.add_argument("--task", default="roundup::csrf::*", help="task-id glob (default: 22 tasks)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 16])
    ap.add_argument("--live", type=int, default=8, help="idle trackers for the RSS figure")
    args = ap.parse_args()
    start_load = loadavg()
    rows = []
    for conc in args.concurrency:
        walls = []
        n = done = 0
        for _ in range(args.runs):
            wall, n, done = run_once(args.trials, conc, args.task)
            walls.append(wall)
        w = median(walls)
        rows.append(
            {
                "concurrency": conc,
                "episodes": n,
                "finished": done,
                "wall_s": walls,
                "median_wall_s": w,
                "episodes_per_s": n / w,
                "s_per_episode": w / n,
            }
        )
    rss = live_rss(args.live)
    print(
        f"Roundup 2.6.0 behind the fault proxy, screen_only, median of {args.runs} ({load_line()})"
    )
    print(
        table(
            ["concurrency", "episodes", "finished", "wall s", "episodes/s", "s/episode"],
            [
                [
                    r["concurrency"],
                    r["episodes"],
                    r["finished"],
                    r["median_wall_s"],
                    r["episodes_per_s"],
                    r["s_per_episode"],
                ]
                for r in rows
            ],
        )
    )
    print(
        f"{args.live} idle trackers: roundup-server RSS median "
        f"{rss['server_rss_median_mib']:.1f} MiB, max {rss['server_rss_max_mib']:.1f} MiB; "
        f"harness grows {rss['harness_growth_per_episode_mib']:.2f} MiB per live episode (proxy "
        "+ session)"
    )
    write_json(args.json, "roundup", {"rows": rows, "live": rss}, start_load)


if __name__ == "__main__":
    main()
