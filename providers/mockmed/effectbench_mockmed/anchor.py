"""The MockMed anchor: which fault each task injects, and the values its baselines must pin.

These are fixture invariants, not findings: MockMed is deterministic and
hand-authored, so the counts below reproduce exactly on every run. They exist so
``effectbench reference`` and the tests can check that the harness still scores the
fixture the way the spec pins it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import attrs

from effectbench.model import Category


@attrs.frozen
class ModeSpec:
    """One anchor task: its fault mode, category and whether a correct action exists."""

    mode: str
    category: Category
    correct_action_available: bool


MODES: Final[tuple[ModeSpec, ...]] = (
    ModeSpec("ok", Category.CONTROL, True),
    ModeSpec("partial", Category.C1_PARTIAL_SAVE, False),
    ModeSpec("duplicate", Category.C2_DUPLICATE_SUBMISSION, False),
    ModeSpec("timeout", Category.C3_OPTIMISTIC_THEN_REJECT, True),
    ModeSpec("optimistic", Category.C3_OPTIMISTIC_THEN_REJECT, False),
    ModeSpec("session", Category.C3_OPTIMISTIC_THEN_REJECT, False),
    ModeSpec("stale", Category.C4_STALE_OVERWRITE, False),
    ModeSpec("double", Category.C5_DOUBLE_DELIVERED_INPUT, False),
    ModeSpec("idempotent", Category.CONTROL, True),
)

FAULT_MODES: Final[tuple[str, ...]] = (
    "partial",
    "duplicate",
    "timeout",
    "optimistic",
    "session",
    "stale",
    "double",
)
"""The seven transactional fault modes (the two controls excluded)."""

TRIALS: Final = 10
"""Trials per task in the pinned run: 9 tasks x 10 trials = 90 episodes per arm."""


@attrs.frozen
class PinnedArm:
    """One baseline's pinned result over the 90 anchor episodes."""

    episodes: int
    outcomes: Mapping[str, int]
    swer_variants: Mapping[str, int]
    swer: int
    over_halt: int
    task_success: int
    screen_success: int
    gap: float
    pass_hat_k: float
    """pass^k for k in 1, 2, 4, 8 (identical for every k on this fixture), 4 dp."""
    per_mode: Mapping[str, str]
    """The outcome every trial of each mode gets (MockMed is deterministic)."""


PINNED: Final[Mapping[str, PinnedArm]] = MappingProxyType(
    {
        "screen_only": PinnedArm(
            episodes=90,
            outcomes=MappingProxyType(
                {"SUCCESS": 20, "SILENT_WRONG_EFFECT": 50, "FALSE_ABORT": 10, "SAFE_HALT": 10}
            ),
            swer_variants=MappingProxyType({"wrong_write": 40, "phantom": 10}),
            swer=50,
            over_halt=0,
            task_success=20,
            screen_success=70,
            gap=0.5556,
            pass_hat_k=0.2222,
            per_mode=MappingProxyType(
                {
                    "ok": "SUCCESS",
                    "partial": "SILENT_WRONG_EFFECT",
                    "duplicate": "SILENT_WRONG_EFFECT",
                    "timeout": "FALSE_ABORT",
                    "optimistic": "SILENT_WRONG_EFFECT",
                    "session": "SAFE_HALT",
                    "stale": "SILENT_WRONG_EFFECT",
                    "double": "SILENT_WRONG_EFFECT",
                    "idempotent": "SUCCESS",
                }
            ),
        ),
        "effect_verified": PinnedArm(
            episodes=90,
            outcomes=MappingProxyType({"SUCCESS": 30, "WRONG_ACTION": 40, "SAFE_HALT": 20}),
            swer_variants=MappingProxyType({}),
            swer=0,
            over_halt=0,
            task_success=30,
            screen_success=30,
            gap=0.0,
            pass_hat_k=0.3333,
            per_mode=MappingProxyType(
                {
                    "ok": "SUCCESS",
                    "partial": "WRONG_ACTION",
                    "duplicate": "WRONG_ACTION",
                    "timeout": "SUCCESS",
                    "optimistic": "SAFE_HALT",
                    "session": "SAFE_HALT",
                    "stale": "WRONG_ACTION",
                    "double": "WRONG_ACTION",
                    "idempotent": "SUCCESS",
                }
            ),
        ),
    }
)
"""The spec's pinned values for the two reference baselines on the MockMed anchor."""

SILENTLY_MISHANDLED_BY_SCREEN_ONLY: Final[tuple[str, ...]] = (
    "partial",
    "duplicate",
    "optimistic",
    "stale",
    "double",
)
"""5 of the 7 transactional faults: screen_only reports success on a wrong record."""

C3_WEB_CELL_SCREEN_ONLY: Final[Mapping[str, int]] = MappingProxyType({"n": 30, "swer": 10})
"""screen_only's (C3_optimistic_then_reject x web) cell."""

WILSON_95: Final[Mapping[tuple[int, int], tuple[float, float]]] = MappingProxyType(
    {
        (50, 90): (0.452719, 0.653843),
        (40, 90): (0.346157, 0.547281),
        (10, 90): (0.061483, 0.192578),
        (0, 90): (0.0, 0.040936),
        (20, 90): (0.148713, 0.318473),
        (70, 90): (0.681527, 0.851287),
        (30, 90): (0.244535, 0.435777),
    }
)
"""Wilson 95% intervals (z = 1.959963984540054), 6 dp, for the pinned counts."""
