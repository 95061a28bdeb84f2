"""Reference arms shipped with EffectBench.

They use only the TaskView and the EnvHandle, so they run against any provider
that offers a product driver (and, for ``effect_verified``, a product verifier).
"""

from effectbench.arms.baselines import EffectVerifiedArm, ScreenOnlyArm

__all__ = ["EffectVerifiedArm", "ScreenOnlyArm"]
