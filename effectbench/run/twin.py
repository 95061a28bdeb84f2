"""The differential reference (SPEC.md 5.4): a reference program's diff on a twin.

For an episode whose task declares a reference-mode diff, the harness provisions a
twin system of record for the same task and trial (``provision`` again: the same
initial state and fault fixture, its own store), reads it, runs the named reference
program (a scripted arm) on it and reads it again. Both reads go into the agent's
episode as ``episode.reference_pre_snapshot`` / ``episode.reference_post_read``, so the
expected diff is logged data and a rescore needs no environment. The twin's own
actions are not logged: only what the judge needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from effectbench.arms.reference import REFERENCE_NAME, ReferenceArm
from effectbench.core.arm import Arm, TaskView
from effectbench.core.codec import converter
from effectbench.core.events import ReferencePostRead, ReferencePreSnapshot, event_data
from effectbench.core.model import AgentReport, AnyEffect, DiffEffect, Snapshot
from effectbench.core.provider import BenchmarkProvider, Oracle
from effectbench.run.options import RunOptions
from effectbench.run.plan import EpisodeSpec

__all__ = ["BUILT_IN_PROGRAMS", "program_report", "read_within", "reference_program", "run_twin"]

BUILT_IN_PROGRAMS: Mapping[str, Callable[[], Arm]] = {REFERENCE_NAME: ReferenceArm}
"""Reference programs a task may name without the run listing them as arms."""

Emit = Callable[[str, Mapping[str, Any], str | None], Awaitable[None]]


def reference_program(effect: AnyEffect, arms: Mapping[str, Arm]) -> tuple[str, Arm | None] | None:
    """(name, program) when ``effect`` takes its expected diff from a reference program:
    one of the run's arms of that name, else a built-in one; None otherwise."""
    if not isinstance(effect, DiffEffect) or not effect.is_reference or effect.reference is None:
        return None
    name = effect.reference
    arm = arms.get(name)
    if arm is None and name in BUILT_IN_PROGRAMS:
        arm = BUILT_IN_PROGRAMS[name]()
    return name, arm


async def read_within(oracle: Oracle, limit: float) -> Snapshot:
    """One oracle read of a twin, bounded by ``limit`` seconds; never raises."""
    try:
        with anyio.move_on_after(limit) as scope:
            snapshot = await oracle.read()
        if scope.cancelled_caught:
            return Snapshot.unreadable(f"twin oracle read did not finish within {limit:g}s")
        if not isinstance(snapshot, Snapshot):
            return Snapshot.unreadable(
                f"twin oracle returned {type(snapshot).__name__}, not a Snapshot"
            )
        return snapshot
    except Exception as exc:  # noqa: BLE001 - the protocol says return unreadable
        return Snapshot.unreadable(f"{type(exc).__name__}: {exc}"[:300])


async def program_report(arm: Arm, view: TaskView, env: Any, timeout: float | None) -> AgentReport:
    """Run a scripted program on a twin; what went wrong becomes a halted report."""
    try:
        with anyio.fail_after(timeout):
            report = await arm.run(view, env)
    except TimeoutError:
        return AgentReport(False, True, f"the reference program ran past {timeout:g}s")
    except Exception as exc:  # noqa: BLE001 - its reads still say what it did
        return AgentReport(
            False, True, f"the reference program raised {type(exc).__name__}: {exc}"[:300]
        )
    if not isinstance(report, AgentReport):
        return AgentReport(False, True, f"the reference program returned {type(report).__name__}")
    return report


async def _emit(emit: Emit, event: ReferencePreSnapshot | ReferencePostRead, ep: str) -> None:
    """Typed events are the only way a line is written (effectbench.core.events)."""
    await emit(event.TYPE, event_data(event), ep)


async def run_twin(
    provider: BenchmarkProvider,
    spec: EpisodeSpec,
    name: str,
    arm: Arm | None,
    options: RunOptions,
    emit: Emit,
) -> str | None:
    """Run the reference program on a twin and log its two reads in ``spec``'s episode;
    an error string when no twin could be had (the episode then fails, environment)."""
    ep = spec.episode_id
    if arm is None:
        unknown = Snapshot.unreadable(
            f"no reference program {name!r}: neither an arm of this run nor built in"
        )
        data = converter.unstructure(unknown)
        await _emit(emit, ReferencePreSnapshot(name, data), ep)
        await _emit(emit, ReferencePostRead(name, data, False, str(unknown.error)), ep)
        return None
    limit = options.provider_timeout
    try:
        with anyio.fail_after(limit):
            twin = await provider.provision(spec.task, spec.trial, spec.params)
    except Exception as exc:  # noqa: BLE001 - provider code
        return f"twin provision failed: {type(exc).__name__}: {exc}"[:300]
    try:
        pre = await read_within(twin.oracle, limit)
        await _emit(emit, ReferencePreSnapshot(name, converter.unstructure(pre)), ep)
        view = TaskView.of(
            spec.task, spec.trial, episode_id=ep, params=spec.params, effect=spec.effect
        )
        report = await program_report(arm, view, twin.env, options.episode_timeout)
        post = await read_within(twin.oracle, limit)
        read = ReferencePostRead(
            name, converter.unstructure(post), bool(report.reported_success), str(report.message)
        )
        await _emit(emit, read, ep)
    finally:
        with anyio.CancelScope(
            shield=True, deadline=anyio.current_time() + options.teardown_timeout
        ):
            with contextlib.suppress(Exception):  # the reads are logged; a leak is the provider's
                await twin.teardown()
    return None
