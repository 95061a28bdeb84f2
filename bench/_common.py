"""Shared bench plumbing: argument parsing, medians, the load average, table and JSON output."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson

from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.testing import InMemoryProvider, NoopArm, SleepArm


def parser(doc: str | None) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--runs", type=int, default=3, help="repetitions per case (median reported)")
    return ap


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def throughput_row(
    arm: str, concurrency: int, episodes: int, walls: Sequence[float], cpus: Sequence[float]
) -> dict[str, Any]:
    """One (arm, concurrency) row of a baseline bench: medians of the repeated runs."""
    w = median(walls)
    return {
        "arm": arm,
        "concurrency": concurrency,
        "episodes": episodes,
        "wall_s": list(walls),
        "median_wall_s": w,
        "episodes_per_s": episodes / w,
        "ms_per_episode": w / episodes * 1e3,
        "cpu_ms_per_episode": median(cpus) / episodes * 1e3,
    }


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "loadavg": list(os.getloadavg()),
    }


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for n, r in enumerate(cells):
        out.append(
            "  ".join(
                c.rjust(w) if n and i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))
            )
        )
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def write_json(
    path: Path | None, name: str, payload: dict[str, Any], before: dict[str, float]
) -> None:
    """``before``: load average when the bench started (the end's is in machine())."""
    if path is None:
        return
    doc = {"bench": name, "machine": machine(), "loadavg_start": before, **payload}
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    print(f"wrote {path}", file=sys.stderr)


def waited(argv: Sequence[str], *, quiet: bool = False) -> tuple[float, float, float]:
    """(wall s, CPU s: user + sys, peak RSS MB: ru_maxrss) of one command, from wait4;
    exits when the command fails. ``quiet`` drops its stderr too (stdout always)."""
    stderr = subprocess.DEVNULL if quiet else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=stderr)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} exited {code}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def byte_compile(python: Path, tree: Path) -> None:
    """Byte-compile a checkout's package, providers and venv with its own ``python``.

    Where PYTHONDONTWRITEBYTECODE is set (this machine sets it) and no ``.pyc`` was
    written, every command recompiles each module it imports: about a second of the
    CPU of a CLI start, which a user's install (pip compiles at install time, Python
    at first import) never pays again."""
    for target in (tree / "effectbench", tree / "providers", tree / ".venv" / "lib"):
        subprocess.run(
            [str(python), "-m", "compileall", "-q", str(target)],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def scheduled_run(
    provider: Any,
    tasks: Sequence[Any],
    arms: dict[str, Any],
    trials: int,
    concurrency: int,
    cpu: Callable[[], float],
    settle: Callable[[], None] = lambda: None,
) -> tuple[float, float, int]:
    """One scheduler run of ``arms`` on ``tasks`` in a temporary directory: (wall s, how
    far ``cpu`` moved, after ``settle``, episodes). Exits when an episode did not finish."""
    plan = build_plan(ProviderInfo(provider.name, provider.version), tasks, list(arms), trials)
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler(
            plan, provider, arms, Path(tmp), run_id="bench",
            options=SchedulerOptions(concurrency=concurrency),
        )  # fmt: skip
        c0, t0 = cpu(), time.perf_counter()
        outcome = anyio.run(sched.run)
        wall = time.perf_counter() - t0
        settle()
        used = cpu() - c0
    if outcome.finished != plan.n_episodes:
        raise SystemExit(f"{provider.name} bench run did not finish every episode: {outcome}")
    return wall, used, plan.n_episodes


def process_children() -> dict[int, list[int]]:
    """Every live process's children, by parent pid, read from /proc once."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            kids.setdefault(int(raw.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    return kids


def loadavg() -> dict[str, float]:
    one, five, fifteen = os.getloadavg()
    return {"1m": one, "5m": five, "15m": fifteen}


def baseline_run(
    provider: Any,
    arm_name: str,
    trials: int,
    concurrency: int,
    probe: Callable[[], float] = lambda: 0.0,
) -> tuple[float, float, float, int]:
    """One scheduler run of a baseline arm (``screen_only`` or ``effect_verified``) on
    ``provider`` in a temporary directory: (wall s, CPU s of this process, how far
    ``probe`` moved over the run, e.g. a server's CPU s, episodes). Exits when an episode
    did not finish, so a figure never counts a broken run."""
    import tempfile
    import time

    import anyio

    from effectbench.arms.baselines import EffectVerifiedArm, ScreenOnlyArm
    from effectbench.core.arm import Arm
    from effectbench.run.plan import ProviderInfo, build_plan
    from effectbench.run.scheduler import Scheduler, SchedulerOptions

    arm: Arm = ScreenOnlyArm() if arm_name == "screen_only" else EffectVerifiedArm()
    plan = build_plan(
        ProviderInfo(provider.name, provider.version), provider.tasks(), [arm_name], trials
    )
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler(
            plan,
            provider,
            {arm_name: arm},
            Path(tmp),
            run_id="bench",
            options=SchedulerOptions(concurrency=concurrency),
        )
        p0, c0, t0 = probe(), time.process_time(), time.perf_counter()
        outcome = anyio.run(sched.run)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        moved = probe() - p0
    if outcome.finished != plan.n_episodes:
        raise SystemExit(f"{provider.name} bench run did not finish every episode: {outcome}")
    return wall, cpu, moved, plan.n_episodes


# --------------------------------------------------------------------------- in-memory runs


def inmemory_provider(n_tasks: int = 100) -> InMemoryProvider:
    """effectbench.testing's in-memory provider with ``n_tasks`` identical control tasks
    (a zero-argument factory by default, so workers can load ``_common:inmemory_provider``)."""
    return InMemoryProvider(copies=n_tasks)


def run_inmemory(
    episodes: int, concurrency: int, arm: NoopArm | SleepArm, n_tasks: int = 100
) -> tuple[float, int]:
    """Run ``episodes`` episodes through the real Scheduler into a temp log.

    Returns (wall seconds from scheduler start to the log closed, lines in the log)."""
    provider = inmemory_provider(n_tasks)
    trials = max(1, episodes // n_tasks)
    plan = build_plan(
        ProviderInfo(provider.name, provider.version), provider.tasks(), [arm.name], trials
    )
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler(
            plan,
            provider,
            {arm.name: arm},
            Path(tmp),
            run_id="bench",
            options=SchedulerOptions(concurrency=concurrency),
        )
        t0 = time.perf_counter()
        outcome = anyio.run(sched.run)
        elapsed = time.perf_counter() - t0
        lines = (Path(tmp) / "events.jsonl").read_bytes().count(b"\n")
    if outcome.finished != plan.n_episodes:
        raise SystemExit(f"bench run did not finish every episode: {outcome}")
    return elapsed, lines
