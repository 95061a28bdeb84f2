"""The one step from raw evidence to an episode's labels: judge, then classify.

The projection, the verifier and the console's live tally all call this, so a change
to how a verdict becomes an outcome has exactly one home.
"""

from __future__ import annotations

from effectbench.core.model import Classification, Effect, Snapshot, Verdict
from effectbench.scoring.classify import classify
from effectbench.scoring.judge import judge

__all__ = ["score_episode"]


def score_episode(
    effect: Effect,
    pre: Snapshot,
    post: Snapshot,
    *,
    reported_success: bool,
    correct_action_available: bool,
) -> tuple[Verdict, Classification]:
    """The verdict on the record and the episode's classification (a plain tuple: this
    runs once per episode of every rescore)."""
    verdict = judge(effect, pre, post)
    return verdict, classify(reported_success, verdict.true_state, correct_action_available)
