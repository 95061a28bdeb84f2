"""Rescore throughput and memory: `effectbench rescore` over a 1,000,000- and a 100,000-event log.

The logs are MockMed-shaped (effectbench.testing.biglog: a real one-trial anchor run
repeated trial after trial with each trial's payload tag, as a concurrent run writes
them, under a real plan and hash chain). The
artifacts are then built once as the end of a run builds them (rescore refuses a log
without the run's record of how it ended, which that writes into manifest.json).

`effectbench rescore DIR` then runs in a subprocess (interpreter start included): the
chain is verified, every episode folded, judged, classified, and the four artifacts
written. Reported: events/s (events / wall), CPU seconds (user + sys of the rescore and its
workers, from wait4: the figure to compare on a shared machine) and the child's peak
RSS (wait4's ru_maxrss), median of --runs. Targets: >= 500,000 events/s; peak RSS at 1M vs 100k
< 1.5x and < 200 MB. `--workers 1 2` runs each log at each worker count (the default:
the rescore's own, every usable core), interleaved run by run so a change in the
machine's load hits every count alike, and prints the speed-up over one worker.

`--check BASELINE.json` compares with a baseline this script wrote earlier (`--json`)
on the same machine and exits 1 when events/s of any (events, workers) row both runs
have dropped by more than 15%: a regression guard used by hand, not a timed CI test.

    .venv/bin/python bench/rescore.py [--events 1000000 100000] [--runs 3] [--workers N ...]
        [--json PATH] [--check BASELINE.json]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from _common import load_line, loadavg, median, parser, table, write_json

from effectbench.audit.attest import attestations
from effectbench.outputs.artifacts import build_artifacts
from effectbench.testing import biglog
from effectbench.testing.biglog import Template

TARGET_EPS = 500_000.0
TARGET_RSS_RATIO = 1.5
TARGET_RSS_MB = 200.0
CHECK_DROP = 0.15


def make_log(run_dir: Path, events: int, template: Template) -> int:
    return biglog.make_log(run_dir, template, events=events)


def _tree_rss_kb(pid: int) -> int:
    """VmRSS of pid plus its children (a sharded rescore forks its workers), in kB."""
    total = 0
    pids = [pid]
    try:
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def rescore_once(run_dir: Path, workers: int | None = None) -> tuple[float, float, float, float]:
    """(wall s, peak RSS MB of the largest process, peak summed RSS MB of the process and
    its worker, sampled every 5 ms, CPU s: user + sys of the process and its workers) of
    one `effectbench rescore` subprocess.

    wait4's ru_maxrss covers the process and its waited-for children but is the largest
    single one, not their sum; the sum double-counts pages the fork shares, so the truth
    lies between the two."""
    exe = Path(sys.executable).with_name("effectbench")
    t0 = time.perf_counter()
    flags = [] if workers is None else ["--workers", str(workers)]
    proc = subprocess.Popen([str(exe), "rescore", *flags, str(run_dir)], stdout=subprocess.DEVNULL)
    peak_sum = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak_sum = max(peak_sum, _tree_rss_kb(proc.pid))
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"effectbench rescore {run_dir} exited {proc.returncode}")
    cpu = usage.ru_utime + usage.ru_stime  # the workers are reaped by it, so counted
    return wall, usage.ru_maxrss / 1024.0, peak_sum / 1024.0, cpu


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000, 100_000])
    ap.add_argument("--dir", type=Path, default=None, help="where to write the logs (temp dir)")
    ap.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[None],
        help="rescore --workers values to run (default: the rescore's own choice)",
    )
    ap.add_argument("--check", type=Path, default=None, help="baseline JSON to compare with")
    args = ap.parse_args()
    start_load = loadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        (root / "template").mkdir()
        template = biglog.record_template(root / "template")
        for n in args.events:
            run_dir = root / f"run-{n}"
            t0 = time.perf_counter()
            count = make_log(run_dir, n, template)
            gen = time.perf_counter() - t0
            build_artifacts(
                run_dir, attest=attestations
            )  # the record a finished run leaves; rescore keeps it
            size = (run_dir / "events.jsonl").stat().st_size
            samples: dict[int | None, list[tuple[float, float, float, float]]] = {
                w: [] for w in args.workers
            }
            for _ in range(args.runs):
                for w in args.workers:  # interleaved: load changes hit every count alike
                    samples[w].append(rescore_once(run_dir, w))
            for w, runs in samples.items():
                walls = [r[0] for r in runs]
                rss = [r[1] for r in runs]
                rss_sum = [r[2] for r in runs]
                cpus = [r[3] for r in runs]
                wall = median(walls)
                rows.append(
                    {
                        "events": count,
                        "workers": w,
                        "log_mb": size / 1e6,
                        "generate_s": gen,
                        "wall_s": walls,
                        "median_wall_s": wall,
                        "events_per_s": count / wall,
                        "peak_rss_mb": rss,
                        "median_peak_rss_mb": median(rss),
                        "peak_rss_sum_mb": rss_sum,
                        "median_peak_rss_sum_mb": median(rss_sum),
                        "cpu_s": cpus,
                        "median_cpu_s": median(cpus),
                        "cpu_us_per_event": median(cpus) / count * 1e6,
                    }
                )
            # free the disk before the next size
            for p in run_dir.iterdir():
                p.unlink()
    print(
        f"effectbench rescore (subprocess, chain verified), median of {args.runs} ({load_line()})"
    )
    print(
        table(
            [
                "events",
                "workers",
                "log MB",
                "wall s",
                "events/s",
                "CPU s",
                "CPU us/event",
                "peak RSS MB",
                "summed RSS MB",
            ],
            [
                [
                    r["events"],
                    "default" if r["workers"] is None else r["workers"],
                    r["log_mb"],
                    r["median_wall_s"],
                    r["events_per_s"],
                    r["median_cpu_s"],
                    r["cpu_us_per_event"],
                    r["median_peak_rss_mb"],
                    r["median_peak_rss_sum_mb"],
                ]
                for r in rows
            ],
        )
    )
    _print_scaling(rows)
    verdicts: dict[str, Any] = {}
    fastest = {}  # per size, the fastest worker count is the one judged
    for r in rows:
        if r["events"] not in fastest or r["events_per_s"] > fastest[r["events"]]["events_per_s"]:
            fastest[r["events"]] = r
    big = fastest[max(fastest)]
    small = fastest[min(fastest)]
    ok = big["events_per_s"] >= TARGET_EPS
    print(
        f"target >= {TARGET_EPS:,.0f} events/s: {big['events_per_s']:,.0f} "
        f"({'met' if ok else 'MISSED'})"
    )
    verdicts["events_per_s"] = ok
    if big is not small:
        # judged on the summed RSS of the process and its worker (the conservative figure)
        key = "median_peak_rss_sum_mb"
        ratio = big[key] / small[key]
        ok_ratio = ratio < TARGET_RSS_RATIO
        ok_mb = big[key] < TARGET_RSS_MB
        print(
            f"target peak RSS {big['events']:,} vs {small['events']:,} < {TARGET_RSS_RATIO}x: "
            f"{ratio:.2f}x ({'met' if ok_ratio else 'MISSED'}); < {TARGET_RSS_MB:.0f} MB: "
            f"{big[key]:.0f} MB ({'met' if ok_mb else 'MISSED'}) (summed RSS)"
        )
        verdicts.update(rss_ratio=ratio, rss_ratio_ok=ok_ratio, rss_mb_ok=ok_mb)
    write_json(
        args.json,
        "rescore",
        {
            "rows": rows,
            "verdicts": verdicts,
            "targets": {
                "events_per_s": TARGET_EPS,
                "rss_ratio": TARGET_RSS_RATIO,
                "rss_mb": TARGET_RSS_MB,
            },
        },
        start_load,
    )
    if args.check is not None and not check(rows, args.check):
        raise SystemExit(1)


def _print_scaling(rows: list[dict[str, Any]]) -> None:
    one = {r["events"]: r for r in rows if r["workers"] == 1}
    for r in rows:
        base = one.get(r["events"])
        if base is not None and r is not base:
            speedup = r["events_per_s"] / base["events_per_s"]
            print(f"{r['events']:,} events: {r['workers']} workers {speedup:.2f}x one worker")


def _key(row: dict[str, Any]) -> tuple[int, int | None]:
    return row["events"], row.get("workers")


def check(rows: list[dict[str, Any]], baseline_path: Path) -> bool:
    """False (and say which) when events/s of a row the baseline also has dropped by more
    than CHECK_DROP; rows only one side has are listed, not judged."""
    baseline = orjson.loads(baseline_path.read_bytes())
    base_rows = {_key(r): r for r in baseline["rows"]}
    ok = True
    for r in rows:
        b = base_rows.get(_key(r))
        if b is None:
            print(f"check: no baseline row for {_key(r)}")
            continue
        ratio = r["events_per_s"] / b["events_per_s"]
        bad = ratio < 1.0 - CHECK_DROP
        ok = ok and not bad
        print(
            f"check {r['events']:,} events, workers {r.get('workers') or 'default'}: "
            f"{r['events_per_s']:,.0f} vs baseline {b['events_per_s']:,.0f} events/s "
            f"({ratio - 1:+.1%}) {'REGRESSION' if bad else 'ok'}"
        )
    print(
        f"check against {baseline_path}: {'passed' if ok else 'FAILED'} (limit -{CHECK_DROP:.0%})"
    )
    return ok


if __name__ == "__main__":
    main()
