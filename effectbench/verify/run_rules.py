"""The run check's rules over a log's plan and episodes: one short pure function per
check, in three tables the log walk of ``run_check._plan_checks`` runs (docs/leaderboard.md
lists every rule). ``PLAN_RULES`` judge the plan ``run.started`` carries, ``EPISODE_RULES``
each ``episode.planned`` against that plan, ``IMAGE_RULES`` each screenshot and each
computer action that cites one. A rule returns its reasons (none: it holds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from effectbench.core.codec import structure_any_effect
from effectbench.core.events import ArmAction, ArmScreenshot
from effectbench.core.hashing import content_hash
from effectbench.core.model import TaskSpec
from effectbench.outputs.artifacts import TASK_AXES
from effectbench.run.plan import episode_id, hash_identity, pack_fingerprint
from effectbench.verify.compare import task_axis

__all__ = [
    "EPISODE_RULES",
    "IMAGE_RULES",
    "PLAN_RULES",
    "SEEN_KEY",
    "ImageFacts",
    "PlanFacts",
    "PlannedFacts",
]

SEEN_KEY: Final = "screenshot"
"""A computer action's detail key naming (sha256) the stored screenshot it was chosen
from (``effectbench.arms.computer_use``: set only when every screenshot is kept)."""


# --- the plan ----------------------------------------------------------------------------------


@attrs.frozen
class PlanFacts:
    """What ``run.started`` (event ``seq``) carries: the plan, the hash it claims for it,
    and the plan's tasks rebuilt (None, with ``unbuilt`` saying why, when they cannot be)."""

    seq: int
    plan: Mapping[str, Any]
    plan_hash: Any
    tasks: tuple[TaskSpec, ...] | None
    unbuilt: str = ""


def plan_hash_is_the_plans(f: PlanFacts) -> Iterable[str]:
    """Refuses a plan hash that does not hash the plan it sits beside: the plan was edited."""
    if hash_identity(f.plan) == f.plan_hash:
        return ()
    return (f"plan_hash in run.started (#{f.seq}) does not hash the plan it carries",)


def plan_tasks_rebuild(f: PlanFacts) -> Iterable[str]:
    """Refuses a plan whose tasks do not rebuild as task specs: no episode can be checked
    against them, so the walk stops here."""
    return () if f.tasks is not None else (f"the plan's tasks cannot be rebuilt: {f.unbuilt}",)


def fingerprint_is_the_tasks(f: PlanFacts) -> Iterable[str]:
    """Refuses a pack fingerprint that the plan's own tasks do not hash to: evidence about
    one pack relabelled as another's."""
    if f.tasks is None or pack_fingerprint(f.tasks) == f.plan.get("pack_fingerprint"):
        return ()
    return ("pack fingerprint in the plan does not match its tasks",)


def task_ids_are_the_tasks(f: PlanFacts) -> Iterable[str]:
    """Refuses a plan whose ``task_ids`` are not its tasks' ids, in order."""
    if f.tasks is None or [t.task_id for t in f.tasks] == list(f.plan.get("task_ids") or []):
        return ()
    return ("the plan's task_ids differ from its tasks",)


PLAN_RULES: Final[tuple[Callable[[PlanFacts], Iterable[str]], ...]] = (
    plan_hash_is_the_plans,
    plan_tasks_rebuild,
    fingerprint_is_the_tasks,
    task_ids_are_the_tasks,
)


# --- each planned episode ----------------------------------------------------------------------


@attrs.frozen
class PlannedFacts:
    """One ``episode.planned`` (event ``seq`` of episode ``ep``, its ``data``) and what the
    plan says of it: its task (None: not in the plan), the trial payload and the hash of
    the effect that trial resolves to; ``terminated``: the episode already ended."""

    seq: int
    ep: str | None
    data: Mapping[str, Any]
    task: TaskSpec | None
    terminated: bool
    params: Mapping[str, str] | None = None
    effect_hash: str | None = None

    @property
    def trial(self) -> Any:
        return self.data.get("trial")

    @property
    def known(self) -> bool:
        """Whether the plan holds this (task, trial), so the other rules can check it."""
        return self.task is not None and isinstance(self.trial, int)

    @property
    def at(self) -> str:
        return f"event #{self.seq} ({self.ep})"


def planned_once(f: PlannedFacts) -> Iterable[str]:
    """Refuses an episode planned again after it terminated: the rerun would replace the
    scored attempt (the scheduler never reruns a finished episode)."""
    if not f.terminated:
        return ()
    why = (
        f"event #{f.seq} plans episode {f.ep} again after it terminated: the rerun "
        "would replace the scored attempt (the scheduler never reruns a finished "
        "episode)"
    )
    return (why,)


def planned_in_the_plan(f: PlannedFacts) -> Iterable[str]:
    """Refuses an episode of a task or trial the plan does not hold; nothing else about
    it can be checked."""
    if f.known:
        return ()
    return (f"event #{f.seq} plans episode {f.ep} for a task or trial not in the plan",)


def planned_under_its_own_id(f: PlannedFacts) -> Iterable[str]:
    """Refuses a planned episode whose id is not ``<arm>::<task_id>::t<trial>``: a second
    id for one planned episode would replace it."""
    if f.task is None or not f.known:
        return ()
    own = episode_id(str(f.data.get("arm")), f.task.task_id, f.trial)
    if f.ep == own:
        return ()
    why = (
        f"event #{f.seq} plans ({f.data.get('arm')}, {f.task.task_id}, {f.trial}) under the "
        f"id {f.ep!r}, not {own!r}: a second id for one planned episode would "
        "replace it"
    )
    return (why,)


def params_are_the_trial_payload(f: PlannedFacts) -> Iterable[str]:
    """Refuses params that are not the trial payload the plan gives this (task, trial)."""
    if f.task is None or not f.known or f.data.get("params") == f.params:
        return ()
    return (f"{f.at}: params are not the trial payload of ({f.task.task_id}, {f.trial})",)


def _logged_effect_hash(data: Mapping[str, Any]) -> str | None:
    try:
        logged = structure_any_effect(data.get("effect")).resolve(data.get("params") or {})
        return content_hash(logged)
    except Exception:  # noqa: BLE001 - untrusted log content
        return None


def effect_is_the_plans(f: PlannedFacts) -> Iterable[str]:
    """Refuses an episode whose logged effect (or its hash) is not the plan's effect
    resolved for this trial: it would be scored against another effect."""
    if not f.known:
        return ()
    if _logged_effect_hash(f.data) == f.effect_hash and f.data.get("effect_hash") == f.effect_hash:
        return ()
    return (f"{f.at}: the effect scored is not the plan's effect for this trial",)


def axes_are_the_plans(f: PlannedFacts) -> Iterable[str]:
    """Refuses an episode whose task axes (category, substrate, split, ...) differ from
    its task's: the metrics would count it under another."""
    if f.task is None or not f.known:
        return ()
    task = f.task
    return tuple(
        f"{f.at}: {field} {f.data.get(field)!r} differs from the plan"
        for field in TASK_AXES
        if f.data.get(field) != task_axis(task, field)
    )


EPISODE_RULES: Final[tuple[Callable[[PlannedFacts], Iterable[str]], ...]] = (
    planned_once,
    planned_in_the_plan,
    planned_under_its_own_id,
    params_are_the_trial_payload,
    effect_is_the_plans,
    axes_are_the_plans,
)


# --- screenshots and the actions that cite them ------------------------------------------------


@attrs.frozen
class ImageFacts:
    """A screenshot or an action event (``type``, ``seq``, ``ep``, ``data``); for a
    screenshot, why its stored image is not the one it names (None: it is); ``shown``
    tells whether the episode logged a screenshot of that sha256 before."""

    type: str
    seq: int
    ep: str | None
    data: Mapping[str, Any]
    problem: str | None = None
    shown: Callable[[str], bool] = lambda _sha: False


def screenshot_is_the_stored_image(f: ImageFacts) -> Iterable[str]:
    """Refuses a screenshot event whose image is missing, elsewhere or edited: the hash
    in the log is what puts the image under the chain."""
    if f.type != ArmScreenshot.TYPE or f.problem is None:
        return ()
    return (f"event #{f.seq} ({f.ep}): screenshot {f.problem}",)


def action_cites_a_logged_screenshot(f: ImageFacts) -> Iterable[str]:
    """Refuses a computer action citing a screenshot its episode did not log before it:
    every screenshot an action was chosen from is stored and logged first."""
    detail = f.data.get("detail")
    if f.type != ArmAction.TYPE or f.data.get("kind") != "computer":
        return ()
    cited = detail.get(SEEN_KEY) if isinstance(detail, Mapping) else None
    if cited is None or f.shown(str(cited)):
        return ()
    why = (
        f"event #{f.seq} ({f.ep}): action cites screenshot {str(cited)[:16]}... that its "
        "episode did not log before it (every screenshot an action was chosen from is "
        "stored and logged first)"
    )
    return (why,)


IMAGE_RULES: Final[tuple[Callable[[ImageFacts], Iterable[str]], ...]] = (
    screenshot_is_the_stored_image,
    action_cites_a_logged_screenshot,
)


def reasons_of(rules: Sequence[Callable[[Any], Iterable[str]]], facts: Any) -> list[str]:
    """Every reason the rules of one table give for ``facts``, in table order."""
    return [reason for rule in rules for reason in rule(facts)]
