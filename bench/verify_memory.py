"""`effectbench verify` memory and speed over runs of 10,000, 100,000 and 1,000,000 episodes.

The runs are MockMed-shaped (effectbench.testing.biglog: a real one-trial anchor run
repeated trial after trial under a real plan and hash chain) with their artifacts
built as the end of a run builds them. `effectbench verify DIR` then runs in a
subprocess: chain, plan, every episode re-judged, every artifact rebuilt and compared
row by row. Reported: wall seconds, CPU seconds (user + sys from wait4, the figure to
compare on a shared machine) and peak RSS (wait4's ru_maxrss) of the verify. Target:
peak RSS at the largest run under 1.5x the smallest's (memory flat in episodes).

    .venv/bin/python bench/verify_memory.py [--episodes 10000 100000 1000000] [--runs 1]
        [--dir DIR] [--json PATH]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import load_line, loadavg, median, parser, table, waited, write_json

from effectbench.audit.attest import attestations
from effectbench.outputs.artifacts import build_artifacts
from effectbench.testing import biglog

TARGET_RSS_RATIO = 1.5


def verify_once(run_dir: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one `effectbench verify` subprocess."""
    return waited([str(Path(sys.executable).with_name("effectbench")), "verify", str(run_dir)])


def main() -> None:
    ap = parser(__doc__)
    ap.set_defaults(runs=1)
    ap.add_argument("--episodes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--dir", type=Path, default=None, help="where to write the runs (temp dir)")
    args = ap.parse_args()
    start_load = loadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        (root / "template").mkdir()
        template = biglog.record_template(root / "template")
        for n in args.episodes:
            run_dir = root / f"run-{n}"
            events = biglog.make_log(run_dir, template, episodes=n)
            build_artifacts(run_dir, attest=attestations)
            size = (run_dir / "events.jsonl").stat().st_size
            runs = [verify_once(run_dir) for _ in range(args.runs)]
            episodes = round(n / len(template.episodes)) * len(template.episodes)
            rows.append(
                {
                    "episodes": episodes,
                    "events": events,
                    "log_mb": size / 1e6,
                    "median_wall_s": median([r[0] for r in runs]),
                    "median_cpu_s": median([r[1] for r in runs]),
                    "median_peak_rss_mb": median([r[2] for r in runs]),
                }
            )
            for p in run_dir.iterdir():  # free the disk before the next size
                p.unlink()
    print(f"effectbench verify (subprocess), median of {args.runs} ({load_line()})")
    print(
        table(
            ["episodes", "events", "log MB", "wall s", "CPU s", "episodes/s", "peak RSS MB"],
            [
                [
                    r["episodes"],
                    r["events"],
                    r["log_mb"],
                    r["median_wall_s"],
                    r["median_cpu_s"],
                    r["episodes"] / r["median_wall_s"],
                    r["median_peak_rss_mb"],
                ]
                for r in rows
            ],
        )
    )
    small = min(rows, key=lambda r: r["episodes"])
    big = max(rows, key=lambda r: r["episodes"])
    ratio = big["median_peak_rss_mb"] / small["median_peak_rss_mb"]
    ok = ratio < TARGET_RSS_RATIO
    print(
        f"target peak RSS {big['episodes']:,} vs {small['episodes']:,} episodes < "
        f"{TARGET_RSS_RATIO}x: {ratio:.2f}x ({'met' if ok else 'MISSED'})"
    )
    write_json(
        args.json,
        "verify_memory",
        {"rows": rows, "verdicts": {"rss_ratio": ratio, "rss_ratio_ok": ok}},
        start_load,
    )


if __name__ == "__main__":
    main()
