"""The oracle mutation audit's cost per task: mutations applied per second, on mockmed and roundup.

Runs `effectbench audit` on each provider's first control task (one trial; the mutation
audit runs on the reference's first trial) and reads its log: for each mutation-tested
task, the mutations applied (and refused) and the wall time from the plan
(``episode.mutation_planned``) to the last ``episode.mutation_read``. Both stores can
restore a saved state, so each mutation is applied in place on the reference's twin: the
mutation through the write handle, an oracle read, the state restored and checked.

    .venv/bin/python bench/mutation_audit.py [--runs 1] [--json PATH]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import orjson
from _common import load_line, loadavg, median, parser, table, write_json

from effectbench.audit.runner import audit_provider

TARGETS = (("mockmed", "mockmed::ok"), ("roundup", "roundup::nocsrf::assign::ok"))


def cost(log: Path) -> tuple[int, int, float]:
    """(applied, refused, seconds) of the mutation audit in one audit log."""
    applied = refused = 0
    start: float | None = None
    end = 0.0
    for line in log.read_bytes().splitlines():
        e = orjson.loads(line)
        if e["type"] == "episode.mutation_planned":
            start = e["ts"] if start is None else min(start, e["ts"])
        elif e["type"] == "episode.mutation_read":
            end = max(end, e["ts"])
            applied += e["data"]["status"] == "applied"
            refused += e["data"]["status"] == "refused"
    return applied, refused, (end - start) if start is not None else 0.0


def run_once(provider: str, task: str) -> tuple[int, int, float]:
    with tempfile.TemporaryDirectory() as tmp:

        async def go() -> Any:
            return await audit_provider(
                provider, out_dir=Path(tmp) / "a", trials=1, concurrency=1, task_globs=[task]
            )

        report = anyio.run(go)
        return cost(report.log_path)


def main() -> None:
    args = parser(__doc__).parse_args()
    before = loadavg()
    print(load_line())
    rows, out = [], {}
    for provider, task in TARGETS:
        runs = [run_once(provider, task) for _ in range(args.runs)]
        secs = median([r[2] for r in runs])
        applied = runs[0][0]
        rate = applied / secs if secs else float("nan")
        rows.append([provider, task, str(applied), str(runs[0][1]), f"{secs:.2f}", f"{rate:.1f}"])
        out[provider] = {"task": task, "applied": applied, "refused": runs[0][1],
                         "seconds": secs, "mutations_per_s": rate}  # fmt: skip
    print(table(["provider", "task", "applied", "refused", "wall s", "mutations/s"], rows))
    write_json(args.json, "mutation_audit", out, before)


if __name__ == "__main__":
    main()
