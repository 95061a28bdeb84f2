"""Artifact identity: do two checkouts produce the same runs, timing aside?

A refactor must not change what a run writes. This script runs four jobs with a
checkout's own ``.venv/bin/effectbench`` (never this process's import path), each into
its own run directory, and writes one JSON holding every artifact's content with the
timing fields masked, and a sha256 of each masked file:

    anchor        effectbench run                                  (mockmed; screen_only +
                                                                    effect_verified; 10 trials)
    mockmed-full  effectbench run --provider mockmed-full
    mockmed-diff  effectbench run --provider mockmed-diff
    roundup       effectbench run --provider roundup --trials 1 --concurrency 4
                      --provider-timeout 300 --task (19 tasks, below)

The Roundup job runs 19 of the CSRF-off tracker's 23 tasks with docs/results-roundup.md's
flags (controls, C1, C2, C3, C4, C7): the whole 45-task pack took 348 s on the shared
2-core machine, these 30 to 130 s. Left out are the two kinds whose outcome is timing on
Roundup: ``open::double`` (C5) sends one submission twice at once, and which copy Roundup
numbers first is a race (its log's issue ids differ from run to run); the three
``*::homonym`` tasks (C6) are refused as an edit collision or not depending on whether the
pristine tracker's two homonym issues were seeded in the same second (their
``@lastactivity`` stamps; docs/results-roundup.md), which flipped all three between two
runs of one commit here (SILENT_WRONG_EFFECT vs SAFE_HALT). ``--roundup-task GLOB``
(repeatable) picks others, ``--jobs`` fewer. Every job passes ``--out DIR -q
--no-report`` (report.html is not compared) and runs with PYTHONHASHSEED=0: Roundup
lists an edit's changed properties in set order ("status, superseder edited ok" or
"superseder, status ..."), which the screen-only arm's logged message repeats.

The files compared, and the fields masked in each (a masked value becomes "<timing>"
or "<varies>" where present and stays null where null, so a field that appears,
disappears or turns null is still a difference; a timing summary keeps its ``count``
and ``scope``):

    results.jsonl  rows' telemetry.wall_ms, .setup_ms, .model_latency_ms,
                   .model_call_latency_ms (timing)
    metrics.json   arms.*.telemetry.wall_ms, .setup_ms, .model_latency_ms and
                   .cost_to_first_success.task_wall_ms (summaries of the timings above)
    manifest.json  run_id (a timestamp), log.final_hash (the chain hashes every event's
                   ts), resumes[].run_id/ts (none in these jobs)
    summary.md     line 1's run id, the log's final hash, the Telemetry table's
                   "wall ms" and "model latency ms" columns
    events.jsonl   every event's ts and h (its chained hash, over ts); run.started's
                   run_id; episode.provisioned's setup_ms; episode.reported's wall_ms;
                   episode.telemetry's model_latency_ms and model_call_latency_ms

Where episodes interleave in the log is timing too (Roundup's order changes from run
to run): events.jsonl is compared per episode, in each episode's own order, with seq
dropped, and results.jsonl's evidence pointers (``events.jsonl#<seq>``) become the
event's place in its episode (``events.jsonl:<episode>#<index>``).

No artifact of these jobs records a path, hostname, pid, port or load average (checked
by running each job twice on one checkout and comparing: only the fields above
differed); the manifest's python/platform/dependencies stay, since one machine and one
uv.lock give the same values and a change there is worth seeing.

    .venv/bin/python bench/artifact_identity.py [CHECKOUT] --out FILE.json [--jobs anchor ...]
    (without --out it prints each file's hash only)
    .venv/bin/python bench/artifact_identity.py --compare A.json B.json   # exit 1 on a difference
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ROUNDUP_TASKS = (  # the CSRF-off tracker's but open::double (C5) and the homonyms (C6)
    "roundup::nocsrf::open::[!d]*",
    "roundup::nocsrf::open::duplicate",
    "roundup::nocsrf::note::*",
    "roundup::nocsrf::status::[!h]*",
    "roundup::nocsrf::priority::ok",
    "roundup::nocsrf::assign::[!h]*",
    "roundup::nocsrf::supersede::*",
    "roundup::nocsrf::refuse_*",
)
JOBS: dict[str, tuple[str, ...]] = {
    "anchor": (),
    "mockmed-full": ("--provider", "mockmed-full"),
    "mockmed-diff": ("--provider", "mockmed-diff"),
    "roundup": (
        "--provider",
        "roundup",
        "--trials",
        "1",
        "--concurrency",
        "4",
        "--provider-timeout",
        "300",
    ),
}
TIMING = "<timing>"
VARIES = "<varies>"
ROW_TIMING = ("wall_ms", "setup_ms", "model_latency_ms", "model_call_latency_ms")
ARM_TIMING = ("wall_ms", "setup_ms", "model_latency_ms")
EVENT_TIMING = {
    "run.started": ("run_id",),
    "episode.provisioned": ("setup_ms",),
    "episode.reported": ("wall_ms",),
    "episode.telemetry": ("model_latency_ms", "model_call_latency_ms"),
}
SUMMARY_KEEP = ("count", "scope")


def _mask(value: Any, placeholder: str = TIMING) -> Any:
    """A timing value without its number: null stays null, a summary keeps its count."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: v if k in SUMMARY_KEEP else _mask(v, placeholder) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, placeholder) for v in value]
    return placeholder


def _mask_keys(obj: dict[str, Any], keys: tuple[str, ...], placeholder: str = TIMING) -> None:
    for key in keys:
        if key in obj:
            obj[key] = _mask(obj[key], placeholder)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    if isinstance(row.get("telemetry"), dict):
        _mask_keys(row["telemetry"], ROW_TIMING)
    return row


def _metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    for arm in (metrics.get("arms") or {}).values():
        telemetry = arm.get("telemetry")
        if isinstance(telemetry, dict):
            _mask_keys(telemetry, ARM_TIMING)
            if isinstance(telemetry.get("cost_to_first_success"), dict):
                _mask_keys(telemetry["cost_to_first_success"], ("task_wall_ms",))
    return metrics


def _manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    _mask_keys(manifest, ("run_id",), VARIES)
    if isinstance(manifest.get("log"), dict):
        _mask_keys(manifest["log"], ("final_hash",), VARIES)
    for resume in manifest.get("resumes") or ():
        if isinstance(resume, dict):
            _mask_keys(resume, ("run_id", "ts"), VARIES)
    return manifest


def _event(event: dict[str, Any]) -> dict[str, Any]:
    _mask_keys(event, ("ts", "h"), VARIES)
    data = event.get("data")
    if isinstance(data, dict):
        _mask_keys(data, EVENT_TIMING.get(str(event.get("type")), ()), VARIES)
    return event


_SUMMARY_SUBS = (
    (re.compile(r"^# EffectBench run \S+$"), "# EffectBench run " + VARIES),
    (re.compile(r"final hash `[0-9a-f]+`"), "final hash `" + VARIES + "`"),
)
_TIMED_COLUMNS = (1, 3)  # the Telemetry table's "wall ms" and "model latency ms" cells


def _summary(text: str) -> list[str]:
    out, in_telemetry = [], False
    for line in text.splitlines():
        for pattern, repl in _SUMMARY_SUBS:
            line = pattern.sub(repl, line)
        if line.startswith("## "):
            in_telemetry = line.startswith("## Telemetry")
        elif in_telemetry and line.startswith("| ") and not line.startswith("| arm "):
            cells = line.split(" | ")
            for i in _TIMED_COLUMNS:
                if i < len(cells) and cells[i] != "n/a":
                    cells[i] = TIMING
            line = " | ".join(cells)
        out.append(line)
    return out


def _events(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The log grouped by episode, and each seq's place as ``<episode>#<index>``.

    Episodes interleave in the log as the scheduler happens to finish their steps (a
    Roundup run's order differs from run to run; MockMed's so far has not), so the log
    is compared per episode, each in its own order, and run-level events in theirs."""
    run: list[Any] = []
    episodes: dict[str, list[Any]] = {}
    places: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line:
            continue
        event = _event(json.loads(line))
        seq, ep = event.pop("seq", None), event.get("ep")
        into = run if ep is None else episodes.setdefault(str(ep), [])
        places[f"events.jsonl#{seq}"] = f"events.jsonl:{ep or 'run'}#{len(into)}"
        into.append(event)
    return {"run": run, "episodes": dict(sorted(episodes.items()))}, places


def _rows(path: Path, places: dict[str, str]) -> list[Any]:
    rows = []
    for line in path.read_text().splitlines():
        if line:
            row = _row(json.loads(line))
            if isinstance(row.get("evidence"), dict):
                row["evidence"] = {k: places.get(v, v) for k, v in row["evidence"].items()}
            rows.append(row)
    return rows


def read_artifacts(run_dir: Path) -> dict[str, Any]:
    """Every compared file of one run directory, masked (see the module docstring)."""
    events, places = _events(run_dir / "events.jsonl")
    return {
        "results.jsonl": _rows(run_dir / "results.jsonl", places),
        "metrics.json": _metrics(json.loads((run_dir / "metrics.json").read_text())),
        "manifest.json": _manifest(json.loads((run_dir / "manifest.json").read_text())),
        "summary.md": _summary((run_dir / "summary.md").read_text()),
        "events.jsonl": events,
    }


def _digest(content: Any) -> str:
    blob = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def run_job(checkout: Path, job: str, out: Path, roundup_tasks: tuple[str, ...]) -> dict[str, Any]:
    """One job's artifacts, masked, with the run's exit status and its wall time."""
    flags = ["run", *JOBS[job]]
    if job == "roundup":
        flags += [a for glob in roundup_tasks for a in ("--task", glob)]
    exe = checkout / ".venv" / "bin" / "effectbench"
    args = [str(exe), *flags, "--out", str(out), "-q", "--no-report"]
    t0 = time.monotonic()
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(args, check=False, cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 3) or not (out / "manifest.json").is_file():
        sys.exit(f"{job}: `{' '.join(args)}` exited {proc.returncode}:\n{proc.stderr.strip()}")
    files = {
        name: {"sha256": _digest(content), "content": content}
        for name, content in read_artifacts(out).items()
    }
    return {"argv": flags, "exit": proc.returncode, "files": files, "_wall_s": wall}


def record(checkout: Path, jobs: list[str], roundup_tasks: tuple[str, ...]) -> dict[str, Any]:
    head = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    result: dict[str, Any] = {"commit": head, "roundup_tasks": list(roundup_tasks), "jobs": {}}
    with tempfile.TemporaryDirectory(prefix="artifact-identity-") as tmp:
        for job in jobs:
            print(f"{job} ...", file=sys.stderr, flush=True)
            result["jobs"][job] = run_job(checkout, job, Path(tmp) / job, roundup_tasks)
            print(f"{job}: {result['jobs'][job]['_wall_s']:.1f} s", file=sys.stderr, flush=True)
    return result


def _differences(a: Any, b: Any, where: str) -> Iterator[str]:
    if type(a) is not type(b):
        yield f"{where}: {_short(a)} -> {_short(b)}"
    elif isinstance(a, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in b:
                yield f"{where}.{key}: removed (was {_short(a[key])})"
            elif key not in a:
                yield f"{where}.{key}: added ({_short(b[key])})"
            else:
                yield from _differences(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _differences(x, y, f"{where}[{i}]")
        if len(a) != len(b):
            yield f"{where}: {len(a)} items -> {len(b)}"
    elif a != b:
        yield f"{where}: {_short(a)} -> {_short(b)}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."


def compare(a_path: Path, b_path: Path, limit: int) -> int:
    """Print every differing job, file and field (``limit`` fields per file); 1 if any."""
    a, b = (json.loads(p.read_text()) for p in (a_path, b_path))
    print(f"A {a_path} (commit {a.get('commit')})\nB {b_path} (commit {b.get('commit')})")
    differ = False
    for job in sorted(set(a["jobs"]) | set(b["jobs"])):
        if job not in a["jobs"] or job not in b["jobs"]:
            print(f"{job}: only in {'A' if job in a['jobs'] else 'B'} (not compared)")
            continue
        ja, jb = a["jobs"][job], b["jobs"][job]
        for key in ("argv", "exit"):
            if ja[key] != jb[key]:
                differ = True
                print(f"{job}: {key} {ja[key]} -> {jb[key]}")
        for name in sorted(set(ja["files"]) | set(jb["files"])):
            fa, fb = ja["files"].get(name), jb["files"].get(name)
            if fa is None or fb is None:
                differ = True
                print(f"{job}/{name}: only in {'A' if fb is None else 'B'}")
            elif fa["sha256"] != fb["sha256"]:
                differ = True
                found = list(_differences(fa["content"], fb["content"], name))
                print(f"{job}/{name}: differs ({len(found)} fields)")
                for line in found[:limit]:
                    print(f"    {line}")
                if len(found) > limit:
                    print(f"    ... {len(found) - limit} more (--limit)")
            else:
                print(f"{job}/{name}: identical {fa['sha256'][:16]}")
    print("DIFFERENT" if differ else "IDENTICAL")
    return 1 if differ else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("checkout", nargs="?", type=Path, default=REPO, help="default: this repo")
    ap.add_argument("--out", type=Path, help="write the JSON (content and hashes) here")
    ap.add_argument("--jobs", nargs="+", choices=list(JOBS), default=list(JOBS))
    ap.add_argument("--roundup-task", action="append", metavar="GLOB", help="repeatable")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A.json", "B.json"))
    ap.add_argument("--limit", type=int, default=40, help="fields printed per differing file")
    args = ap.parse_args()
    if args.compare:
        missing = [str(p) for p in args.compare if not p.is_file()]
        if missing:
            sys.exit(f"no such file: {', '.join(missing)} (write one with --out first)")
        sys.exit(compare(args.compare[0], args.compare[1], args.limit))
    checkout = args.checkout.resolve()
    if not (checkout / ".venv" / "bin" / "effectbench").is_file():
        sys.exit(f"{checkout} has no .venv/bin/effectbench: run `make setup` there first")
    tasks = tuple(args.roundup_task or ROUNDUP_TASKS)
    result = record(checkout, args.jobs, tasks)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    for job, ran in result["jobs"].items():
        for name, file in ran["files"].items():
            print(f"{job}/{name}: {file['sha256']}")


if __name__ == "__main__":
    main()
