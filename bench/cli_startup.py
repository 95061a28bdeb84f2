"""CLI start-up: wall time of `effectbench --version`, `--help` and `effectbench providers`.

Each command runs --runs times (default 10) as a fresh subprocess; the median is
reported. `--version` must stay light (heavy imports are deferred into the commands
that need them); `providers` loads every installed provider entry point. Also shown:
the cost of `import structlog` alone in a fresh interpreter, which pulls in rich
(structlog.dev and structlog.tracebacks import it at module level when installed, so
no configuration avoids it; only not importing structlog does). Target: --version
<= 0.15 s.

    .venv/bin/python bench/cli_startup.py [--runs 10] [--json PATH]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from _common import load_line, loadavg, median, parser, table, write_json

TARGET_VERSION_S = 0.15
EXE = Path(sys.executable).with_name("effectbench")
IMPORT_PROBE = (
    "import sys, time; t = time.perf_counter(); import {mod}; "
    "print(time.perf_counter() - t, sum(m.split('.')[0] == 'rich' for m in sys.modules))"
)


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def import_cost(mod: str, runs: int) -> tuple[float, int]:
    """(median seconds to import ``mod`` in a fresh interpreter, rich modules it loaded)."""
    secs, rich = [], 0
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", IMPORT_PROBE.format(mod=mod)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        secs.append(float(out[0]))
        rich = int(out[1])
    return median(secs), rich


def main() -> None:
    ap = parser(__doc__)
    ap.set_defaults(runs=10)
    args = ap.parse_args()
    start_load = loadavg()
    cases = {
        "effectbench --version": [str(EXE), "--version"],
        "effectbench --help": [str(EXE), "--help"],
        "effectbench providers": [str(EXE), "providers"],
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
    }
    rows = []
    for name, cmd in cases.items():
        wall(cmd)  # warm the page cache
        samples = [wall(cmd) for _ in range(args.runs)]
        rows.append(
            {"command": name, "runs": args.runs, "wall_s": samples, "median_s": median(samples)}
        )
    structlog_s, rich_mods = import_cost("structlog", args.runs)
    print(f"CLI start-up, median of {args.runs} fresh processes ({load_line()})")
    print(table(["command", "median s"], [[r["command"], r["median_s"]] for r in rows]))
    print(
        f"import structlog alone: {structlog_s * 1000:.0f} ms ({rich_mods} rich modules loaded with it)"
    )
    version = rows[0]["median_s"]
    ok = version <= TARGET_VERSION_S
    print(
        f"target --version <= {TARGET_VERSION_S} s: {version:.3f} s ({'met' if ok else 'MISSED'})"
    )
    write_json(
        args.json,
        "cli_startup",
        {
            "rows": rows,
            "import_structlog_s": structlog_s,
            "rich_modules_with_structlog": rich_mods,
            "target_version_s": TARGET_VERSION_S,
        },
        start_load,
    )


if __name__ == "__main__":
    main()
