"""Two checkouts side by side: CLI start-up and scheduler overhead, interleaved.

A refactor promises "no slower"; on a shared machine two benches run minutes apart
differ by more than the change. This runs the same measurement in BEFORE and AFTER
(each a checkout with its own ``.venv``) alternately, ABBA, round after round, so both
see the same load, and prints the median of each side and their ratio. CPU time (user
+ sys of the child, from wait4) is the figure to read; wall time is shown beside it.

Measured per round: fresh processes of ``effectbench --version``, ``--help``,
``run --help``, ``providers``, ``rescore ANCHOR``, ``verify ANCHOR`` (each checkout
records its own anchor run first), and one ``bench/scheduler_overhead.py`` pass at
concurrency 64 (episodes/s and CPU us per episode, from its JSON).

Both trees are byte-compiled first (``compileall`` of the package and of
site-packages): a machine that sets PYTHONDONTWRITEBYTECODE otherwise recompiles in
every process, which swamps what is measured.

    .venv/bin/python bench/checkout_ab.py BEFORE AFTER [--rounds 10] [--episodes 20000]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import byte_compile, load_line, loadavg, median, table, waited, write_json

CLI_CASES: dict[str, list[str]] = {
    "--version": ["--version"],
    "--help": ["--help"],
    "run --help": ["run", "--help"],
    "providers": ["providers"],
    "rescore ANCHOR": ["rescore", "{anchor}"],
    "verify ANCHOR": ["verify", "{anchor}"],
}


COLUMNS = ("before_first", "after_first", "before_cpu", "after_cpu", "ratio")


def exe(tree: Path) -> Path:
    return tree / ".venv" / "bin" / "effectbench"


def check_tree(tree: Path) -> None:
    for need in (exe(tree), tree / "bench" / "scheduler_overhead.py"):
        if not need.exists():
            raise SystemExit(f"{need} is missing: run `make setup` in {tree} first")


def record_anchor(tree: Path, where: Path) -> Path:
    out = where / "anchor"
    subprocess.run(
        [str(exe(tree)), "run", "--out", str(out), "--quiet"], check=True, stdout=subprocess.DEVNULL
    )
    return out


def cli_sample(tree: Path, anchor: Path, args: list[str]) -> tuple[float, float]:
    argv = [str(exe(tree)), *(a.format(anchor=anchor) for a in args)]
    wall, cpu, _ = waited(argv, quiet=True)
    return wall, cpu


def scheduler_sample(tree: Path, episodes: int, where: Path) -> tuple[float, float]:
    """(episodes/s, CPU us per episode) of one scheduler_overhead pass at 64."""
    out = where / f"sched-{tree.name}.json"
    subprocess.run(
        [
            str(tree / ".venv" / "bin" / "python"),
            str(tree / "bench" / "scheduler_overhead.py"),
            "--episodes",
            str(episodes),
            "--runs",
            "1",
            "--concurrency",
            "64",
            "--json",
            str(out),
        ],
        check=True,
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    row = json.loads(out.read_text())["rows"][0]
    return float(row["episodes_per_s"]), float(row["cpu_us_per_episode"])


def one_round(
    order: tuple[Path, Path], anchors: dict[Path, Path], episodes: int, where: Path
) -> dict[str, dict[Path, tuple[float, float]]]:
    got: dict[str, dict[Path, tuple[float, float]]] = {}
    for name, args in CLI_CASES.items():
        got[name] = {tree: cli_sample(tree, anchors[tree], args) for tree in order}
    got["scheduler at 64"] = {tree: scheduler_sample(tree, episodes, where) for tree in order}
    return got


def summarise(
    samples: dict[str, dict[Path, list[tuple[float, float]]]], before: Path, after: Path
) -> list[dict[str, float | str]]:
    rows: list[dict[str, float | str]] = []
    for name, by_tree in samples.items():
        row: dict[str, float | str] = {"case": name}
        for side, tree in (("before", before), ("after", after)):
            row[f"{side}_first"] = median([s[0] for s in by_tree[tree]])
            row[f"{side}_cpu"] = median([s[1] for s in by_tree[tree]])
        b, a = float(row["before_cpu"]), float(row["after_cpu"])
        row["ratio"] = a / b if b else 0.0
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rounds", type=int, default=10, help="ABBA rounds (median reported)")
    ap.add_argument("--episodes", type=int, default=20_000, help="per scheduler pass")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args()
    before, after = args.before.resolve(), args.after.resolve()
    for tree in (before, after):
        check_tree(tree)
        byte_compile(tree / ".venv" / "bin" / "python", tree)
    start_load = loadavg()
    samples: dict[str, dict[Path, list[tuple[float, float]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        anchors = {}
        for tree in (before, after):
            (where / tree.name).mkdir(exist_ok=True)
            anchors[tree] = record_anchor(tree, where / tree.name)
        for i in range(args.rounds):
            order = (before, after) if i % 2 == 0 else (after, before)
            for name, by_tree in one_round(order, anchors, args.episodes, where).items():
                for tree, sample in by_tree.items():
                    samples.setdefault(name, {before: [], after: []})[tree].append(sample)
            print(f"round {i + 1}/{args.rounds} done", file=sys.stderr)
    rows = summarise(samples, before, after)
    print(f"{before} (before) vs {after} (after), {args.rounds} ABBA rounds ({load_line()})")
    print("CLI rows: wall s and CPU s; scheduler row: episodes/s and CPU us per episode")
    print(
        table(
            ["case", "before", "after", "before CPU", "after CPU", "after/before CPU"],
            [[r[k] for k in ("case", *COLUMNS)] for r in rows],
        )
    )
    write_json(args.json, "checkout_ab", {"rounds": args.rounds, "rows": rows}, start_load)


if __name__ == "__main__":
    main()
