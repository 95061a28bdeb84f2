"""Report build time and size: `effectbench report` over two 100,000-episode runs.

- mockmed: a MockMed-shaped log fabricated as bench/rescore.py does (a real one-trial
  anchor run of both baselines, its episodes repeated per trial with that trial's
  payload): 9 tasks x 2 arms x 5,556 trials, real snapshots and silent wrong effects.
- inmemory: run through the real Scheduler with effectbench.testing's in-memory provider and
  no-op arm: 1,000 tasks x 1 arm x 100 trials (many tasks: the per-task table's case).

The artifacts are built first (`effectbench rescore`, not timed); then
`effectbench report DIR` runs in a subprocess (interpreter start included) --runs
times. Reported: median wall and CPU, the largest peak RSS of the report process
(flat memory: the same at 100,000 and 200,000 episodes), report size, episodes with a
drill-down. Targets: under
10 s and 10 MB at 100,000 episodes; the anchor run's report (built once, 10 trials)
under 1 MB.

    .venv/bin/python bench/report.py [--episodes 100000] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _common import inmemory_provider, load_line, loadavg, median, parser, table, write_json

from effectbench.api import build_outputs
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.testing import NoopArm, biglog

TARGET_S = 10.0
TARGET_MB = 10.0
TARGET_ANCHOR_MB = 1.0
EXE = Path(sys.executable).with_name("effectbench")


def inmemory_run(run_dir: Path, episodes: int, n_tasks: int = 1000) -> None:
    provider = inmemory_provider(n_tasks)
    arm = NoopArm()
    plan = build_plan(
        ProviderInfo(provider.name, provider.version),
        provider.tasks(),
        [arm.name],
        max(1, episodes // n_tasks),
    )
    run_dir.mkdir()
    sched = Scheduler(
        plan, provider, {arm.name: arm}, run_dir, run_id="bench-report",
        options=SchedulerOptions(concurrency=64),
    )  # fmt: skip
    anyio.run(sched.run)


def anchor_run(run_dir: Path) -> None:
    """The anchor (both baselines, 10 trials) through the CLI, which writes report.html."""
    subprocess.run(
        [str(EXE), "run", "--arm", "screen_only", "--arm", "effect_verified", "--trials", "10",
         "--out", str(run_dir), "-q"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip


def report_once(run_dir: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB of the child): on a shared machine the CPU time is the
    steadier figure; the RSS is this child's own (wait4), not the largest child's so far."""
    t0 = time.perf_counter()
    child = subprocess.Popen([str(EXE), "report", str(run_dir)], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"effectbench report {run_dir} exited {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(name: str, run_dir: Path, runs: int) -> dict[str, Any]:
    build_outputs(run_dir, report=False)
    times = [report_once(run_dir) for _ in range(runs)]
    walls = [w for w, _, _ in times]
    html = (run_dir / "report.html").read_text("utf-8")
    episodes = sum(1 for line in (run_dir / "results.jsonl").open("rb") if line.strip())
    note = re.search(r'<p class="note" id="drill-note">([^<]*)</p>', html)
    return {
        "case": name,
        "episodes": episodes,
        "drilled": html.count('<details class="ep"'),
        "report_mb": len(html.encode("utf-8")) / 1e6,
        "wall_s": walls,
        "median_wall_s": median(walls),
        "median_cpu_s": median([c for _, c, _ in times]),
        "peak_rss_mb": max(m for _, _, m in times),
        "sampled": bool(note and note.group(1).startswith("Sampled")),
    }


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--dir", type=Path, default=None, help="where to write the runs (temp dir)")
    args = ap.parse_args()
    start_load = loadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        anchor_run(root / "anchor")
        anchor_mb = (root / "anchor" / "report.html").stat().st_size / 1e6
        (root / "template").mkdir()
        template = biglog.record_template(root / "template")
        biglog.make_log(root / "mockmed", template, episodes=args.episodes)
        rows.append(measure("mockmed", root / "mockmed", args.runs))
        t0 = time.perf_counter()
        inmemory_run(root / "inmemory", args.episodes)
        print(f"(in-memory run of {args.episodes:,} episodes: {time.perf_counter() - t0:.1f} s)")
        rows.append(measure("inmemory", root / "inmemory", args.runs))
    print(f"effectbench report (subprocess), median of {args.runs} ({load_line()})")
    print(
        table(
            ["case", "episodes", "drilled", "report MB", "wall s", "CPU s", "RSS MB", "sampled"],
            [
                [
                    r["case"],
                    r["episodes"],
                    r["drilled"],
                    r["report_mb"],
                    r["median_wall_s"],
                    r["median_cpu_s"],
                    r["peak_rss_mb"],
                    r["sampled"],
                ]
                for r in rows
            ],
        )
    )
    ok_anchor = anchor_mb < TARGET_ANCHOR_MB
    print(
        f"anchor report: {anchor_mb:.3f} MB (target < {TARGET_ANCHOR_MB} MB: "
        f"{'met' if ok_anchor else 'MISSED'})"
    )
    verdicts: dict[str, Any] = {"anchor_mb": anchor_mb, "anchor_ok": ok_anchor}
    for r in rows:
        ok_s, ok_mb = r["median_wall_s"] < TARGET_S, r["report_mb"] < TARGET_MB
        print(
            f"{r['case']}: {r['median_wall_s']:.2f} s wall, {r['median_cpu_s']:.2f} s CPU "
            f"(target < {TARGET_S:.0f} s: {'met' if ok_s else 'MISSED'}), {r['report_mb']:.2f} "
            f"MB (target < {TARGET_MB:.0f} MB: {'met' if ok_mb else 'MISSED'})"
        )
        verdicts[r["case"]] = {"time_ok": ok_s, "size_ok": ok_mb}
    write_json(
        args.json,
        "report",
        {
            "rows": rows,
            "verdicts": verdicts,
            "targets": {"s": TARGET_S, "mb": TARGET_MB, "anchor_mb": TARGET_ANCHOR_MB},
        },
        start_load,
    )


if __name__ == "__main__":
    main()
