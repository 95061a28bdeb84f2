"""A long MockMed run under load: >= 200,000 episodes at concurrency 256, end to end.

`effectbench run` (the two baselines on MockMed over real HTTP and SQLite) runs in a
subprocess, sampled every 50 ms for the resident memory of its process tree and its
open file descriptors, split into the running phase (until run.finished is in the log)
and the artifact-building phase after it. Then, on the finished run: `effectbench
rescore` (wall, peak RSS from wait4) and `effectbench report` (wall). Last, a second
run of the same plan is interrupted with SIGINT once 2,000 episodes have finished, and
the time from the signal to its exit is taken (what Ctrl-C costs mid-run).

    .venv/bin/python bench/load.py [--episodes 200000] [--concurrency 256] [--dir DIR]
        [--json PATH]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
from _common import load_line, loadavg, parser, table, waited, write_json

TASKS = 9  # MockMed's pack
ARMS = 2
SAMPLE_S = 0.05
INTERRUPT_AFTER = 2000


def _exe() -> str:
    return str(Path(sys.executable).with_name("effectbench"))


def _tree(pid: int) -> list[int]:
    """pid and every descendant, from /proc's children lists."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{tid}/children").read_text().split()]
        except OSError:
            pass
    return out


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _finished(log: Path) -> bool:
    """run.finished is in the log's last few KB (the run has started building)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            return b'"run.finished"' in f.read()
    except OSError:
        return False


@attrs.define
class Phase:
    """Peaks of one phase of a sampled process tree."""

    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    peak_fds: int = 0

    def sample(self, pids: list[int]) -> None:
        self.peak_rss_mb = max(self.peak_rss_mb, sum(_rss_kb(p) for p in pids) / 1024.0)
        self.peak_fds = max(self.peak_fds, sum(_fds(p) for p in pids))


def sampled_run(out: Path, trials: int, concurrency: int) -> tuple[Phase, Phase]:
    """(running, building) of one whole `effectbench run`."""
    argv = [_exe(), "run", "--trials", str(trials), "--concurrency", str(concurrency)]
    argv += ["--out", str(out), "--quiet", "--screenshots", "none"]
    running, building = Phase(), Phase()
    t0 = time.perf_counter()
    t_finished = None
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    while proc.poll() is None:
        if t_finished is None and _finished(out / "events.jsonl"):
            t_finished = time.perf_counter()
        (running if t_finished is None else building).sample(_tree(proc.pid))
        time.sleep(SAMPLE_S)
    end = time.perf_counter()
    if proc.returncode != 0:
        raise SystemExit(f"effectbench run exited {proc.returncode}")
    t_finished = t_finished or end
    running.seconds, building.seconds = t_finished - t0, end - t_finished
    return running, building


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, peak RSS MB from wait4) of one command."""
    wall, _, rss_mb = waited(argv)
    return wall, rss_mb


@attrs.define
class Tail:
    """Counts ``needle`` in a growing file, reading only what was appended since the last
    look, up to its last complete line (a line being written is counted next time)."""

    path: Path
    needle: bytes
    count: int = 0
    offset: int = 0

    def grow(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return self.count
        end = chunk.rfind(b"\n") + 1
        self.count += chunk.count(self.needle, 0, end)
        self.offset += end
        return self.count


def interrupt_latency(out: Path, trials: int, concurrency: int) -> float:
    """Seconds from SIGINT, sent once INTERRUPT_AFTER episodes finished, to exit."""
    argv = [_exe(), "run", "--trials", str(trials), "--concurrency", str(concurrency)]
    argv += ["--out", str(out), "--quiet", "--screenshots", "none", "--no-report"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finished = Tail(out / "events.jsonl", b'"episode.finished"')
    while finished.grow() < INTERRUPT_AFTER:
        if proc.poll() is not None:
            raise SystemExit("the run ended before it could be interrupted")
        time.sleep(0.2)
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.wait()
    return time.perf_counter() - t0


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--episodes", type=int, default=200_000)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--dir", type=Path, default=None, help="where to write the runs (temp dir)")
    args = ap.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    start_load = loadavg()
    trials = -(-args.episodes // (TASKS * ARMS))
    episodes = trials * TASKS * ARMS
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        running, building = sampled_run(root / "run", trials, args.concurrency)
        rescore_s, rescore_mb = timed([_exe(), "rescore", str(root / "run")])
        report_s, report_mb = timed([_exe(), "report", str(root / "run")])
        ctrl_c = interrupt_latency(root / "interrupted", trials, args.concurrency)
    figures: dict[str, Any] = {
        "episodes": episodes,
        "concurrency": args.concurrency,
        "episodes_per_s": episodes / running.seconds,
        "running": attrs.asdict(running),
        "building": attrs.asdict(building),
        "rescore_s": rescore_s,
        "rescore_peak_rss_mb": rescore_mb,
        "report_s": report_s,
        "report_peak_rss_mb": report_mb,
        "ctrl_c_s": ctrl_c,
    }
    print(f"effectbench run, {episodes:,} MockMed episodes at {args.concurrency} ({load_line()})")
    print(
        table(
            ["phase", "seconds", "peak RSS MB", "peak fds"],
            [
                ["running", running.seconds, running.peak_rss_mb, running.peak_fds],
                ["building artifacts", building.seconds, building.peak_rss_mb, building.peak_fds],
                ["rescore", rescore_s, rescore_mb, ""],
                ["report", report_s, report_mb, ""],
            ],
        )
    )
    print(f"episodes/s while running: {figures['episodes_per_s']:,.0f}")
    print(f"Ctrl-C after {INTERRUPT_AFTER:,} episodes: exit in {ctrl_c:.2f} s")
    write_json(args.json, "load", figures, start_load)


if __name__ == "__main__":
    main()
