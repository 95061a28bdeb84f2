"""MockMed: EffectBench's public reference fixture, a synthetic medical-records app.

Registered through the ``effectbench.providers`` entry point like any third-party
provider. See docs/writing-a-provider.md for how it is put together.
"""

from effectbench_mockmed.anchor import FAULT_MODES, MODES, PINNED, ModeSpec, PinnedArm
from effectbench_mockmed.oracle import MockMedOracle
from effectbench_mockmed.provider import MockMedProvider
from effectbench_mockmed.tasks import TASKS

__all__ = [
    "FAULT_MODES",
    "MODES",
    "PINNED",
    "TASKS",
    "MockMedOracle",
    "MockMedProvider",
    "ModeSpec",
    "PinnedArm",
]
