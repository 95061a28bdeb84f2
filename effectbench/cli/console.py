"""What a person sees: live progress while a run goes, the headline when it ends.

Progress is a display, never a source of truth: its running SWER judges each episode
from the in-memory snapshots as it ends, while the numbers that count come from the
log afterwards. rich is used only on a terminal; elsewhere progress is plain lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from effectbench.core.model import Outcome

if TYPE_CHECKING:  # a rescore's headline must not import the scheduler
    from effectbench.run.plan import Plan
    from effectbench.run.scheduler import EpisodeOutcome


class RunningScore:
    """Per-arm done / eligible / silent-wrong counts: this session's episodes plus, on a
    resume, the already-done ones (``resumed``), so the figures share the total's base."""

    def __init__(self) -> None:
        self.done: dict[str, int] = {}
        self.eligible: dict[str, int] = {}
        self.swe: dict[str, int] = {}

    def add(self, outcome: EpisodeOutcome) -> None:
        arm = outcome.spec.arm
        self.done[arm] = self.done.get(arm, 0) + 1
        if outcome.failure_class is not None or outcome.report is None:
            return
        if outcome.pre is None or outcome.post is None:
            return
        from effectbench.scoring.labels import score_episode

        try:
            _, c = score_episode(
                outcome.spec.effect,
                outcome.pre,
                outcome.post,
                reported_success=outcome.report.reported_success,
                correct_action_available=outcome.spec.task.correct_action_available,
            )
        except Exception:  # noqa: BLE001 - a display must never break a run
            return
        if c.scoreable:
            self.eligible[arm] = self.eligible.get(arm, 0) + 1
            if c.outcome is Outcome.SILENT_WRONG_EFFECT:
                self.swe[arm] = self.swe.get(arm, 0) + 1

    def resumed(self, log_path: Path, kept: frozenset[str]) -> None:
        """Count the episodes a resume keeps, as the log scored them (all or none: a
        log the display cannot read leaves the figures as they were)."""
        from effectbench.log.reader import read_log
        from effectbench.projections.episodes import project_episodes

        try:
            latest = {r.episode_id: r for r in project_episodes(read_log(log_path))}
        except Exception:  # noqa: BLE001 - a display must never break a run
            return
        for r in latest.values():
            if r.episode_id not in kept:
                continue
            self.done[r.arm] = self.done.get(r.arm, 0) + 1
            if r.eligible:
                self.eligible[r.arm] = self.eligible.get(r.arm, 0) + 1
                if r.outcome is Outcome.SILENT_WRONG_EFFECT:
                    self.swe[r.arm] = self.swe.get(r.arm, 0) + 1

    def tally(self) -> str:
        """``"scored 84, failed 6"``: episodes done with an outcome, and the rest (a
        failure of any class, or an unreadable record), so a run of failures never looks
        like progress."""
        scored = sum(self.eligible.values())
        return f"scored {scored}, failed {sum(self.done.values()) - scored}"

    def text(self, arms: tuple[str, ...]) -> str:
        parts = []
        for arm in arms:
            n = self.eligible.get(arm, 0)
            if n:
                parts.append(f"{arm} {self.swe.get(arm, 0)}/{n}")
        return ("SWER " + ", ".join(parts)) if parts else ""


class PlainProgress:
    """One line at roughly every 10% (and at most every ``every_s`` seconds) on a stream."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 5.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self.score = RunningScore()
        self.arms: tuple[str, ...] = ()
        self.total = 0
        self.done = 0
        self.session = 0
        self._t0 = time.monotonic()
        self._last_line = self._t0
        self._next_mark = 0

    def run_planned(self, plan: Plan, total: int, already_done: int) -> None:
        self.arms, self.total, self.done = plan.arms, total, already_done
        self._t0 = self._last_line = time.monotonic()
        self._next_mark = already_done + max(1, total // 10)
        resumed = f" ({already_done} already done)" if already_done else ""
        print(f"running {total} episodes{resumed}", file=self.stream, flush=True)

    def resumed(self, log_path: Path, kept: frozenset[str]) -> None:
        self.score.resumed(log_path, kept)

    def episode_done(self, outcome: EpisodeOutcome) -> None:
        self.done += 1
        self.session += 1
        self.score.add(outcome)
        now = time.monotonic()
        if (
            self.done >= self._next_mark
            or self.done == self.total
            or now - self._last_line >= self.every_s
        ):
            self._next_mark = self.done + max(1, self.total // 10)
            self._last_line = now
            self._line(now)

    def _line(self, now: float) -> None:
        rate = self.session / max(now - self._t0, 1e-9)
        score = self.score.text(self.arms)
        print(
            f"[{self.done}/{self.total}] {rate:.1f} episodes/s  {self.score.tally()}"
            + (f"  {score}" if score else ""),
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        pass


class RichProgress:
    """A rich progress bar: done / total, rate, running SWER per arm (terminals only)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.score = RunningScore()
        self.arms: tuple[str, ...] = ()
        self._t0 = time.monotonic()
        self.session = 0
        self._progress = Progress(
            TextColumn("[bold]episodes"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[tally]}"),
            TextColumn("{task.fields[swer]}"),
            console=Console(file=stream if stream is not None else sys.stderr),
            transient=False,
        )
        self._task: Any = None

    def run_planned(self, plan: Plan, total: int, already_done: int) -> None:
        self.arms = plan.arms
        self._t0 = time.monotonic()
        self._progress.start()
        self._task = self._progress.add_task(
            "run", total=total, completed=already_done, rate="", tally="", swer=""
        )

    def resumed(self, log_path: Path, kept: frozenset[str]) -> None:
        self.score.resumed(log_path, kept)

    def episode_done(self, outcome: EpisodeOutcome) -> None:
        self.session += 1
        self.score.add(outcome)
        rate = self.session / max(time.monotonic() - self._t0, 1e-9)
        self._progress.update(
            self._task,
            advance=1,
            rate=f"{rate:.1f}/s",
            tally=self.score.tally(),
            swer=self.score.text(self.arms),
        )

    def close(self) -> None:
        self._progress.stop()


def make_progress(
    stream: TextIO | None = None, *, quiet: bool = False
) -> PlainProgress | RichProgress | None:
    stream = stream if stream is not None else sys.stderr
    if quiet:
        return None
    if stream.isatty():
        return RichProgress(stream)
    return PlainProgress(stream)


# --------------------------------------------------------------------------- headline


def _ci(block: Mapping[str, Any] | None) -> str:
    ci = None if block is None else block.get("ci95")
    if not ci:
        return "[  n/a  ]"
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _rate(block: Mapping[str, Any] | None) -> str:
    if not block:
        return "n/a"
    num, den, rate = block.get("numerator"), block.get("denominator"), block.get("rate")
    pct = "  n/a" if rate is None else f"{rate:6.1%}"
    return f"{num:>4}/{den:<4} {pct} {_ci(block)}"


def format_headline(metrics: Mapping[str, Any]) -> str:
    """The end-of-run headline per arm: n, SWER (wrong_write, phantom), over-halt, task
    success, screen success and the gap, each with its 95% interval."""
    arms: Mapping[str, Any] = metrics.get("arms") or {}
    order = metrics.get("arm_order") or list(arms)
    lines: list[str] = []
    for arm in order:
        a = arms.get(arm) or {}
        coverage = a.get("coverage")
        cov = "n/a" if coverage is None else f"{coverage:.1%}"
        failures = {k: v for k, v in (a.get("failure_counts") or {}).items() if v}
        fail_txt = (
            ("; not scored: " + ", ".join(f"{k} {v}" for k, v in sorted(failures.items())))
            if failures
            else ""
        )
        lines.append(
            f"{arm}: n={a.get('n_episodes')} eligible={a.get('n_eligible')} (coverage "
            f"{cov}){fail_txt}"
        )
        lines.append(f"  SWER            {_rate(a.get('swer'))}")
        lines.append(f"    wrong_write   {_rate(a.get('swer_wrong_write'))}")
        lines.append(f"    phantom       {_rate(a.get('swer_phantom'))}")
        lines.append(f"  over-halt       {_rate(a.get('over_halt'))}")
        lines.append(f"  task success    {_rate(a.get('task_success'))}")
        lines.append(f"  screen success  {_rate(a.get('screen_success'))}")
        gap = a.get("gap")
        if isinstance(gap, Mapping):
            value = gap.get("value")
            lines.append(
                f"  gap             {'n/a' if value is None else f'{value:+.4f}'} {_ci(gap)}"
            )
        elif isinstance(gap, (int, float)):
            lines.append(f"  gap             {gap:+.4f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- reference


def _num(block: Any) -> Any:
    return block.get("numerator") if isinstance(block, Mapping) else None


def reference_rows(
    pinned: Mapping[str, Any], metrics: Mapping[str, Any], results: list[Mapping[str, Any]]
) -> list[tuple[str, str, str, str, bool]]:
    """(arm, quantity, pinned, measured, equal) for every pinned value of every arm.

    ``pinned`` maps an arm name to an object shaped like effectbench_mockmed.anchor.PinnedArm.
    """
    rows: list[tuple[str, str, str, str, bool]] = []

    def add(arm: str, what: str, want: Any, got: Any) -> None:
        rows.append((arm, what, str(want), str(got), want == got))

    for arm, pin in pinned.items():
        a: Mapping[str, Any] = (metrics.get("arms") or {}).get(arm) or {}
        add(arm, "episodes", pin.episodes, a.get("n_episodes"))
        add(arm, "eligible", pin.episodes, a.get("n_eligible"))
        counts = a.get("outcome_counts") or {}
        for outcome in Outcome:
            want = int(pin.outcomes.get(outcome.value, 0))
            got = counts.get(outcome.value.lower(), counts.get(outcome.value))
            if want or got:
                add(arm, outcome.value, want, got)
        add(arm, "SWER", pin.swer, _num(a.get("swer")))
        add(
            arm,
            "  wrong_write",
            int(pin.swer_variants.get("wrong_write", 0)),
            _num(a.get("swer_wrong_write")),
        )
        add(arm, "  phantom", int(pin.swer_variants.get("phantom", 0)), _num(a.get("swer_phantom")))
        add(arm, "over-halt", pin.over_halt, _num(a.get("over_halt")))
        add(arm, "task success", pin.task_success, _num(a.get("task_success")))
        add(arm, "screen success", pin.screen_success, _num(a.get("screen_success")))
        gap = a.get("gap")
        gap_value = gap.get("value") if isinstance(gap, Mapping) else gap
        add(arm, "gap", f"{pin.gap:.4f}", None if gap_value is None else f"{gap_value:.4f}")
        pow_k = a.get("pass_pow_k")
        if isinstance(pow_k, Mapping) and pow_k.get("value") is not None:
            add(arm, f"pass^{pow_k.get('k')}", f"{pin.pass_hat_k:.4f}", f"{pow_k['value']:.4f}")
        for mode, want_outcome in pin.per_mode.items():
            task_id = f"mockmed::{mode}"
            got_outcomes = sorted(
                {
                    str(r.get("outcome") or r.get("failure_class"))
                    for r in results
                    if r.get("arm") == arm and r.get("task_id") == task_id
                }
            )
            add(arm, f"every {mode} trial", want_outcome, "/".join(got_outcomes) or "none")
    return rows


def format_reference(rows: list[tuple[str, str, str, str, bool]]) -> str:
    head = (
        "MockMed anchor: fixture invariants, not findings.\n"
        "These pinned values check that the harness still scores its own synthetic fixture as the\n"
        "spec pins it; they say nothing about any real system of record or agent.\n"
    )
    table = [("arm", "quantity", "pinned", "measured", "")]
    table += [
        (arm, what, want, got, "ok" if eq else "MISMATCH") for arm, what, want, got, eq in rows
    ]
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    lines = [
        "  ".join([*(c.ljust(w) for c, w in zip(r[:4], widths)), r[4]]).rstrip() for r in table
    ]
    return head + "\n" + "\n".join(lines)


__all__ = [
    "PlainProgress",
    "RichProgress",
    "RunningScore",
    "format_headline",
    "format_reference",
    "make_progress",
    "reference_rows",
]
