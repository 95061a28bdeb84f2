"""The computer-use loop of one episode: screenshot, ask, act, under a hard budget.

Each turn sends the current screenshot (with the goal and the history) and performs the
actions the model answers with, in order, on the screen. The budgets (model calls,
tokens, wall time) are checked as each answer arrives and before any of its actions
run: the answer that crosses one acts on nothing, not even a ``done``. An answer with no
action is a halt (the model never said it succeeded). Malformed actions go back to the
model as errors and are counted; too many end the episode as a halt.

Every screenshot the model is sent is recorded on the telemetry (the harness stores it
once by content hash, ``--screenshots``), and every action the model asked for is
recorded with the sha256 of the screenshot it was chosen from (``screenshot``; ``seen``
when ``--screenshots`` keeps not all of them), its kind, coordinates and text, so the
log ties each action to what the model saw and ``verify`` checks the image is stored.
"""

from __future__ import annotations

import hashlib
import time
from typing import Final

import attrs

from effectbench.arms.computer_use.actions import (
    ActionError,
    Done,
    Viewport,
    describe,
    parse_action,
)
from effectbench.arms.computer_use.screen import Screen
from effectbench.arms.computer_use.turns import Result, Wire
from effectbench.core.model import AgentReport
from effectbench.core.provider import Telemetry

__all__ = ["SYSTEM", "Budget", "run_loop"]

SYSTEM: Final = (
    "You operate a business application in a web browser on behalf of a user. You see "
    "only the screen, as screenshots, and act with the computer actions (click, type, "
    "key, scroll, ...) at pixel coordinates of the screenshot. Check on the screen that "
    "what you did is really saved before you report. Call 'done' exactly once at the "
    "end: success true only when the task's effect is really in the record; success "
    "false when it is not or cannot be done safely."
)
ACTION: Final = "computer"
"""The log's action kind of every computer action (``detail.action`` says which)."""


@attrs.frozen
class Budget:
    """Hard limits for one episode: model calls (turns), input plus output tokens over
    all calls, wall seconds since the episode's first screenshot, malformed actions."""

    max_turns: int = 24
    max_tokens: int = 400_000
    max_wall_s: float = 600.0
    max_bad_actions: int = 3


def _halt(message: str) -> AgentReport:
    return AgentReport(reported_success=False, halted=True, message=message)


@attrs.define
class _State:
    turns: int = 0
    tokens: int = 0
    bad: int = 0


def _over(st: _State, budget: Budget, t0: float) -> str | None:
    """Why the budget is spent, or None."""
    if st.tokens > budget.max_tokens:
        return f"token budget exhausted: {st.tokens} tokens > {budget.max_tokens}"
    elapsed = time.monotonic() - t0
    if elapsed > budget.max_wall_s:
        return f"wall-time budget exhausted: {elapsed:.1f} s > {budget.max_wall_s:g} s"
    return None


def _record(telemetry: Telemetry, png: bytes, turn: int, viewport: Viewport) -> dict[str, str]:
    """Record a screenshot the model is sent; how its actions cite it: ``screenshot``
    (sha256) when every screenshot is kept, so verify holds the action to the stored
    image, else ``seen`` (``--screenshots final|none`` store some or none of them)."""
    telemetry.screenshot(png, f"turn {turn} ({viewport})")
    key = "screenshot" if telemetry.screenshot_policy == "all" else "seen"
    return {key: hashlib.sha256(png).hexdigest()}


async def run_loop(
    prompt: str, screen: Screen, wire: Wire, budget: Budget, telemetry: Telemetry
) -> AgentReport:
    """Drive the model until it reports, halts or runs out of budget."""
    t0 = time.monotonic()
    viewport = screen.viewport
    telemetry.action("viewport", width=viewport.width, height=viewport.height)
    png = await screen.capture()
    seen = _record(telemetry, png, 0, viewport)
    wire.begin(SYSTEM, prompt, png)
    st = _State()
    while True:
        if st.turns >= budget.max_turns:
            return _halt(f"turn budget exhausted: {st.turns} model calls without done")
        spent = _over(st, budget, t0)
        if spent is not None:
            return _halt(spent)
        turn = await wire.ask()
        st.turns += 1
        st.tokens += turn.tokens
        spent = _over(st, budget, t0)  # before this turn's actions: none of them run
        if spent is not None:
            return _halt(spent)
        if not turn.calls:
            return _halt(f"model stopped without calling done: {turn.text[:200]}".rstrip(": "))
        results: list[Result] = []
        for call in turn.calls:
            try:
                if call.args is None:
                    raise ActionError(call.error or "the call could not be read")
                action = parse_action(call.name, call.args, viewport)
            except ActionError as exc:
                st.bad += 1
                telemetry.action(ACTION, action=call.name[:64], ok=False, **seen)
                results.append(Result(call, str(exc)))
                continue
            telemetry.action(ACTION, action=action.name, **describe(action), **seen)
            if isinstance(action, Done):
                return AgentReport(
                    reported_success=action.success,
                    halted=not action.success,
                    message=action.message,
                )
            await screen.perform(action)
            results.append(Result(call))
        if st.bad >= budget.max_bad_actions:
            last = next((r.error for r in reversed(results) if r.error is not None), "")
            return _halt(f"{st.bad} malformed actions (last: {last})")
        png = await screen.capture()
        seen = _record(telemetry, png, st.turns, viewport)
        wire.reply(results, png)
