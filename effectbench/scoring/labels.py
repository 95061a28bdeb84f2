"""The one step from raw evidence to an episode's labels: judge, then classify.

The projection, the verifier and the console's live tally all call this, so a change
to how a verdict becomes an outcome has exactly one home. It is also where a log's
scoring version picks the judge: a run rescores under the version its plan names.
"""

from __future__ import annotations

from effectbench.core import versions
from effectbench.core.model import AnyEffect, Classification, Effect, InvalidSpec, Snapshot, Verdict
from effectbench.scoring.classify import classify
from effectbench.scoring.judge import judge, judge_inserts

__all__ = ["score_episode", "scoring_version_of"]

_V1: str = "1.0.0"


def scoring_version_of(named: object) -> str:
    """The version a log is scored under: the one its plan names when this code knows it,
    else this code's own (a log with none predates the field: the current rules)."""
    if isinstance(named, str) and named in versions.SCORING_VERSIONS:
        return named
    return versions.SCORING_VERSION


def _judge_v1(effect: AnyEffect, pre: Snapshot, post: Snapshot) -> Verdict:
    if type(effect) is not Effect:
        raise InvalidSpec(
            "a state diff is not an effect under scoring version 1.0.0 (diffs need 1.1.0)"
        )
    return judge_inserts(effect, pre, post)


def score_episode(
    effect: AnyEffect,
    pre: Snapshot,
    post: Snapshot,
    *,
    reported_success: bool,
    correct_action_available: bool,
    scoring_version: str | None = None,
    reference: tuple[Snapshot, Snapshot] | None = None,
) -> tuple[Verdict, Classification]:
    """The verdict on the record and the episode's classification (a plain tuple: this
    runs once per episode of every rescore). ``scoring_version``: the log's (None: this
    code's); ``reference``: the reference run's (pre, post) of a reference-mode diff."""
    if scoring_version == _V1:
        verdict = _judge_v1(effect, pre, post)
    else:
        verdict = judge(effect, pre, post, reference)
    return verdict, classify(reported_success, verdict.true_state, correct_action_available)
