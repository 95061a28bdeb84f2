"""Browser episode rate, paired: this checkout against another, run by run, in turn.

On a shared machine single runs swing with the load from one minute to the next, so a
before/after figure compares runs made back to back: each pair runs the same case once
on the other checkout (``--before``, e.g. a ``git worktree add --detach`` of the old
commit) and once on this one, in alternating order, every run a fresh process of that
checkout's own code (``bench/browser.py``'s ``run_once``: the MockMed anchor through the
scheduler). Reported per case: pooled episodes/s of each side and the median of the
after/before ratios (docs/performance.md, 8b).

    .venv/bin/python bench/browser_ab.py --before /path/to/old/checkout [--pairs 8]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from _common import load_line, loadavg, median, parser, table, write_json

HERE = Path(__file__).resolve().parent.parent
_ONE = (
    "import json, os, sys\n"
    "sys.path.insert(0, 'bench')\n"
    "import browser as b\n"
    "b._subreaper()\n"
    "which, trials, conc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n"
    "wall, cpu, n = b.run_once(trials, conc, b._cdp_arms() if which == 'cdp' else None)\n"
    "print(json.dumps({'wall': wall, 'cpu': cpu, 'n': n}))\n"
)
CASES = {"cdp": 6, "pool": 2}
"""Trials per run: the CDP agent's one arm (54 episodes), the pool's two arms (36)."""


def one(checkout: Path, which: str, concurrency: int) -> dict[str, Any]:
    """One run of ``which`` on ``checkout``'s code, in a fresh process."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join((str(checkout), str(checkout / "providers" / "mockmed"))),
    }
    done = subprocess.run(
        [sys.executable, "-c", _ONE, which, str(CASES[which]), str(concurrency)],
        cwd=checkout, env=env, capture_output=True, check=True, timeout=600,
    )  # fmt: skip
    row: dict[str, Any] = orjson.loads(done.stdout.splitlines()[-1])
    return row


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--before", type=Path, required=True, help="the other checkout")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    start = loadavg()
    sides = {"before": args.before.resolve(), "after": HERE}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for i in range(args.pairs):
        for which in CASES:
            order = ("before", "after") if i % 2 == 0 else ("after", "before")
            for side in order:
                runs.setdefault((which, side), []).append(one(sides[side], which, args.concurrency))
    rows = []
    for which in CASES:
        before, after = runs[(which, "before")], runs[(which, "after")]
        ratios = [(a["n"] / a["wall"]) / (b["n"] / b["wall"]) for a, b in zip(after, before)]
        rows.append({
            "case": which, "pairs": len(ratios),
            "before_eps": sum(r["n"] for r in before) / sum(r["wall"] for r in before),
            "after_eps": sum(r["n"] for r in after) / sum(r["wall"] for r in after),
            "median_ratio": median(ratios), "ratios": ratios,
        })  # fmt: skip
    print(f"Browser episodes at concurrency {args.concurrency}, paired ({load_line()})")
    print(table(
        ["case", "pairs", "before eps/s", "after eps/s", "median after/before"],
        [[r["case"], r["pairs"], r["before_eps"], r["after_eps"], r["median_ratio"]]
         for r in rows],
    ))  # fmt: skip
    write_json(args.json, "browser_ab", {"rows": rows, "runs": {
        f"{w}:{s}": v for (w, s), v in runs.items()}}, start)  # fmt: skip


if __name__ == "__main__":
    main()
