"""CLI start-up: wall time of `effectbench --version`, `--help` of every command,
`effectbench providers`, and `rescore` / `verify` of the MockMed anchor run.

Each command runs --runs times (default 10) as a fresh subprocess; the median wall time
is reported, and the median CPU time (user + sys, wait4), which a busy shared machine
inflates less. `--version` must stay light (heavy imports are deferred into the commands
that need them); `providers` loads every installed provider entry point. The anchor run
(9 tasks x both baselines x 10 trials, 1,622 events) is recorded once into a temp dir
first; `rescore` rebuilds its artifacts and its report, as a user runs it. Also shown:
the cost of `import structlog` alone in a fresh interpreter, which pulls in rich
(structlog.dev and structlog.tracebacks import it at module level when installed, so
no configuration avoids it; only not importing structlog does, and the CLI configures
it the moment something imports it). Targets: --version <= 0.15 s; --help of any
command <= 0.25 s; rescore and verify of the anchor run <= 0.35 s.

    .venv/bin/python bench/cli_startup.py [--runs 10] [--json PATH]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from _common import load_line, loadavg, median, parser, table, waited, write_json

TARGET_VERSION_S = 0.15
TARGET_HELP_S = 0.25
TARGET_ANCHOR_S = 0.35
COMMANDS = ("run", "rescore", "report", "compare", "verify", "export", "providers", "arms")
COMMANDS += ("reference", "audit", "pack", "new")
EXE = Path(sys.executable).with_name("effectbench")
IMPORT_PROBE = (
    "import sys, time; t = time.perf_counter(); import {mod}; "
    "print(time.perf_counter() - t, sum(m.split('.')[0] == 'rich' for m in sys.modules))"
)


def wall(cmd: list[str]) -> float:
    return timed(cmd)[0]


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one run of ``cmd``."""
    elapsed, cpu, _ = waited(cmd, quiet=True)
    return elapsed, cpu


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
    with tempfile.TemporaryDirectory() as tmp:
        anchor = Path(tmp) / "anchor"
        subprocess.run(
            [str(EXE), "run", "--out", str(anchor), "--quiet"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        cases = {
            "effectbench --version": [str(EXE), "--version"],
            "effectbench --help": [str(EXE), "--help"],
            **{f"effectbench {c} --help": [str(EXE), c, "--help"] for c in COMMANDS},
            "effectbench providers": [str(EXE), "providers"],
            "effectbench rescore ANCHOR": [str(EXE), "rescore", str(anchor)],
            "effectbench rescore --no-report ANCHOR": [
                str(EXE),
                "rescore",
                "--no-report",
                str(anchor),
            ],
            "effectbench verify ANCHOR": [str(EXE), "verify", str(anchor)],
            "python -c pass (floor)": [sys.executable, "-c", "pass"],
        }
        rows = []
        for name, cmd in cases.items():
            wall(cmd)  # warm the page cache
            samples = [timed(cmd) for _ in range(args.runs)]
            rows.append(
                {
                    "command": name,
                    "runs": args.runs,
                    "wall_s": [w for w, _ in samples],
                    "cpu_s": [c for _, c in samples],
                    "median_s": median([w for w, _ in samples]),
                    "median_cpu_s": median([c for _, c in samples]),
                }
            )
    structlog_s, rich_mods = import_cost("structlog", args.runs)
    print(f"CLI start-up, median of {args.runs} fresh processes ({load_line()})")
    print(
        table(
            ["command", "median s", "median CPU s"],
            [[r["command"], r["median_s"], r["median_cpu_s"]] for r in rows],
        )
    )
    print(
        f"import structlog alone: {structlog_s * 1000:.0f} ms ({rich_mods} rich modules loaded "
        "with it)"
    )
    by_name = {r["command"]: r["median_s"] for r in rows}
    version = by_name["effectbench --version"]
    ok = version <= TARGET_VERSION_S
    print(
        f"target --version <= {TARGET_VERSION_S} s: {version:.3f} s ({'met' if ok else 'MISSED'})"
    )
    helps = max(v for k, v in by_name.items() if k.endswith("--help"))
    print(
        f"target --help of every command <= {TARGET_HELP_S} s: slowest {helps:.3f} s "
        f"({'met' if helps <= TARGET_HELP_S else 'MISSED'})"
    )
    for name in ("effectbench rescore ANCHOR", "effectbench verify ANCHOR"):
        v = by_name[name]
        print(
            f"target {name} <= {TARGET_ANCHOR_S} s: {v:.3f} s "
            f"({'met' if v <= TARGET_ANCHOR_S else 'MISSED'})"
        )
    write_json(
        args.json,
        "cli_startup",
        {
            "rows": rows,
            "import_structlog_s": structlog_s,
            "rich_modules_with_structlog": rich_mods,
            "target_version_s": TARGET_VERSION_S,
            "target_help_s": TARGET_HELP_S,
            "target_anchor_s": TARGET_ANCHOR_S,
        },
        start_load,
    )


if __name__ == "__main__":
    main()
