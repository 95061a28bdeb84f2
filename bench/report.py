"""Report build time and size: `effectbench report` over two 100,000-episode runs.

- mockmed: a MockMed-shaped log fabricated as bench/rescore.py does (a real one-trial
  anchor run of both baselines, its episodes repeated per trial with that trial's
  payload): 9 tasks x 2 arms x 5,556 trials, real snapshots and silent wrong effects.
- inmemory: run through the real Scheduler with effectbench.testing's in-memory provider and
  no-op arm: 1,000 tasks x 1 arm x 100 trials (many tasks: the per-task table's case).

The artifacts are built first (`effectbench rescore`, not timed); then
`effectbench report DIR` runs in a subprocess (interpreter start included) --runs
times. Reported: median wall and CPU, the largest peak RSS of the report process,
report size, episodes with a drill-down. Targets: under 10 s and 10 MB at 100,000
episodes; the anchor run's report (built once, 10 trials) under 1 MB.

Case ``view`` (issue 30): ``effectbench view`` of a folder of --view-runs runs (default
100: copies of the anchor and of three small in-memory runs, each with its artifacts
and report), both ways: ``--static`` (subprocess to exit: the index and every run's
episodes.html written) and served (subprocess start to the index's last byte read over
HTTP, interpreter start included; then a warm GET of the index). Target: <= 1 s. The
checkout is byte-compiled first, as an installed package is (bench/_common.byte_compile).

Case ``memory``: the peak RSS (wait4) of ``effectbench report`` over fabricated MockMed
runs of each --memory size (default 100,000 and 200,000 episodes): flat means the larger
run costs no more than 1.5x the smaller's.

    .venv/bin/python bench/report.py [--cases build,view,memory] [--episodes 100000]
        [--view-runs 100] [--memory 100000 200000] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Final

import anyio
from _common import (
    byte_compile,
    inmemory_provider,
    load_line,
    loadavg,
    median,
    parser,
    table,
    waited,
    write_json,
)

from effectbench.api import build_outputs
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.testing import NoopArm, biglog

TARGET_S = 10.0
TARGET_MB = 10.0
TARGET_ANCHOR_MB = 1.0
TARGET_VIEW_S = 1.0
TARGET_RSS_RATIO = 1.5
EXE = Path(sys.executable).with_name("effectbench")
ROOT = Path(__file__).resolve().parent.parent


def inmemory_run(run_dir: Path, episodes: int, n_tasks: int = 1000) -> None:
    """``episodes`` episodes of the no-op arm on ``n_tasks`` in-memory tasks, into ``run_dir``."""
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


_SPAWN: Final = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss)\n"
)
"""A small interpreter that starts the measured command and reports its wait4. Linux
folds the high-water RSS of the memory a process had before its exec into its
ru_maxrss, and a child forked (or vforked) from this bench starts with the bench's, which
holds a whole 200,000-episode artifact build: measured directly, the report's "peak
RSS" was this process's (87.6 and 112.5 MB where /usr/bin/time says 55.7 MB at 100,000)."""


def report_once(run_dir: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB of the report process): on a shared machine the CPU time
    is the steadier figure; the RSS is the report process's own (see _SPAWN)."""
    return own_usage([str(EXE), "report", str(run_dir)])


def own_usage(argv: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of ``argv`` alone, started through ``_SPAWN``."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _SPAWN, *argv], check=True, capture_output=True, text=True
    ).stdout.split()
    wall = time.perf_counter() - t0
    if int(out[0]):
        raise SystemExit(f"{' '.join(argv)} exited {out[0]}")
    return wall, float(out[1]), int(out[2]) / 1024


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


def view_folder(root: Path, anchor: Path, n_runs: int) -> Path:
    """``n_runs`` run directories: the anchor and three small in-memory runs, copied in turn."""
    bases = [anchor]
    for i, (tasks, trials) in enumerate(((20, 3), (50, 2), (9, 10))):
        base = root / f"view-base-{i}"
        inmemory_run(base, tasks * trials, n_tasks=tasks)
        build_outputs(base, report=True)
        bases.append(base)
    folder = root / "view"
    for i in range(n_runs):
        shutil.copytree(bases[i % len(bases)], folder / f"run{i:03d}")
    return folder


def served_once(folder: Path) -> tuple[float, float, int, float]:
    """(start to the index's last byte, a warm GET of it, its bytes, the CPU s of the whole
    process: start, both GETs and the stop) of ``effectbench view``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(EXE), "view", str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[1]
        with urllib.request.urlopen(url) as resp:
            size = len(resp.read())
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        with urllib.request.urlopen(url) as resp:
            resp.read()
        warm = time.perf_counter() - t1
    finally:
        proc.send_signal(signal.SIGINT)
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
    return first, warm, size, usage.ru_utime + usage.ru_stime


def measure_view(folder: Path, runs: int) -> dict[str, Any]:
    byte_compile(Path(sys.executable), ROOT)
    static = [waited([str(EXE), "view", str(folder), "--static"]) for _ in range(runs)]
    served = [served_once(folder) for _ in range(runs)]
    return {
        "runs_in_folder": sum(1 for _ in folder.iterdir() if _.is_dir()),
        "static_wall_s": [w for w, _, _ in static],
        "static_median_wall_s": median([w for w, _, _ in static]),
        "static_median_cpu_s": median([c for _, c, _ in static]),
        "static_index_mb": (folder / "index.html").stat().st_size / 1e6,
        "served_first_s": [f for f, _, _, _ in served],
        "served_median_first_s": median([f for f, _, _, _ in served]),
        "served_median_warm_s": median([w for _, w, _, _ in served]),
        "served_median_cpu_s": median([c for _, _, _, c in served]),
        "served_index_mb": served[0][2] / 1e6,
    }


def measure_memory(root: Path, template: Any, sizes: list[int]) -> list[dict[str, Any]]:
    out = []
    for n in sizes:
        run_dir = root / f"memory-{n}"
        biglog.make_log(run_dir, template, episodes=n)
        build_outputs(run_dir, report=False)
        wall, cpu, rss = own_usage([str(EXE), "report", str(run_dir)])
        out.append({"episodes": n, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss})
        shutil.rmtree(run_dir)
    return out


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--cases", default="build,view", help="any of build, view, memory")
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--view-runs", type=int, default=100, help="runs in the viewed folder")
    ap.add_argument("--memory", type=int, nargs="+", default=[100_000, 200_000])
    ap.add_argument("--dir", type=Path, default=None, help="where to write the runs (temp dir)")
    args = ap.parse_args()
    cases = set(args.cases.split(","))
    start_load = loadavg()
    rows: list[dict[str, Any]] = []
    verdicts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        anchor_run(root / "anchor")
        anchor_mb = (root / "anchor" / "report.html").stat().st_size / 1e6
        (root / "template").mkdir()
        template = biglog.record_template(root / "template")
        if "view" in cases:
            view = measure_view(view_folder(root, root / "anchor", args.view_runs), args.runs)
            verdicts["view"] = _view_verdict(view)
        if "memory" in cases:
            memory = measure_memory(root, template, sorted(args.memory))
            verdicts["memory"] = _memory_verdict(memory)
        if "build" in cases:
            biglog.make_log(root / "mockmed", template, episodes=args.episodes)
            rows.append(measure("mockmed", root / "mockmed", args.runs))
            t0 = time.perf_counter()
            inmemory_run(root / "inmemory", args.episodes)
            print(
                f"(in-memory run of {args.episodes:,} episodes: {time.perf_counter() - t0:.1f} s)"
            )
            rows.append(measure("inmemory", root / "inmemory", args.runs))
    if rows:
        _print_build(rows, args.runs, anchor_mb, verdicts)
    write_json(
        args.json,
        "report",
        {
            "rows": rows,
            "verdicts": verdicts,
            "targets": {
                "s": TARGET_S,
                "mb": TARGET_MB,
                "anchor_mb": TARGET_ANCHOR_MB,
                "view_s": TARGET_VIEW_S,
                "rss_ratio": TARGET_RSS_RATIO,
            },
        },
        start_load,
    )


def _view_verdict(v: dict[str, Any]) -> dict[str, Any]:
    ok = max(v["static_median_wall_s"], v["served_median_first_s"]) <= TARGET_VIEW_S
    print(
        f"effectbench view of {v['runs_in_folder']} runs, median of {len(v['static_wall_s'])} "
        f"({load_line()}):\n"
        f"  --static: {v['static_median_wall_s']:.3f} s wall, {v['static_median_cpu_s']:.3f} s "
        f"CPU, index {v['static_index_mb']:.3f} MB\n"
        f"  served: {v['served_median_first_s']:.3f} s from start to the index read, warm GET "
        f"{v['served_median_warm_s']:.3f} s, index {v['served_index_mb']:.3f} MB, CPU of the "
        f"whole process {v['served_median_cpu_s']:.3f} s\n"
        f"  target <= {TARGET_VIEW_S:.0f} s: {'met' if ok else 'MISSED'}"
    )
    return {**v, "ok": ok}


def _memory_verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    print(f"effectbench report peak RSS ({load_line()}):")
    print(
        table(
            ["episodes", "wall s", "CPU s", "peak RSS MB"],
            [[r["episodes"], r["wall_s"], r["cpu_s"], r["peak_rss_mb"]] for r in rows],
        )
    )
    ratio = rows[-1]["peak_rss_mb"] / rows[0]["peak_rss_mb"]
    ok = ratio <= TARGET_RSS_RATIO
    print(
        f"  {rows[-1]['episodes']:,} vs {rows[0]['episodes']:,}: {ratio:.2f}x "
        f"(target <= {TARGET_RSS_RATIO}x: {'met' if ok else 'MISSED'})"
    )
    return {"rows": rows, "ratio": ratio, "ok": ok}


def _print_build(
    rows: list[dict[str, Any]], runs: int, anchor_mb: float, verdicts: dict[str, Any]
) -> None:
    print(f"effectbench report (subprocess), median of {runs} ({load_line()})")
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
    verdicts.update({"anchor_mb": anchor_mb, "anchor_ok": ok_anchor})
    for r in rows:
        ok_s, ok_mb = r["median_wall_s"] < TARGET_S, r["report_mb"] < TARGET_MB
        print(
            f"{r['case']}: {r['median_wall_s']:.2f} s wall, {r['median_cpu_s']:.2f} s CPU "
            f"(target < {TARGET_S:.0f} s: {'met' if ok_s else 'MISSED'}), {r['report_mb']:.2f} "
            f"MB (target < {TARGET_MB:.0f} MB: {'met' if ok_mb else 'MISSED'})"
        )
        verdicts[r["case"]] = {"time_ok": ok_s, "size_ok": ok_mb}


if __name__ == "__main__":
    main()
