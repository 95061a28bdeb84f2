"""The smallest complete third-party EffectBench provider: a notes app and its oracle.

Copy this package to start your own (see ../README.md). The entry point in
``pyproject.toml`` names ``NotesProvider``; importing this module is all it takes.
"""

from effectbench_example_notes.app import BODY_LIMIT, Fault, NotesApp, NotesDriver, NotesReadback
from effectbench_example_notes.oracle import NotesOracle
from effectbench_example_notes.provider import NotesProvider
from effectbench_example_notes.tasks import TASKS

__all__ = [
    "BODY_LIMIT",
    "TASKS",
    "Fault",
    "NotesApp",
    "NotesDriver",
    "NotesOracle",
    "NotesProvider",
    "NotesReadback",
]
