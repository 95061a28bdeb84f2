"""The names of every file in a run directory, in one place.

Every module names a run's files through ``RunDir`` (or these constants), so a new file
a run writes is added here and the ``--force`` guard (effectbench.run.outdir) knows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import attrs

__all__ = [
    "ARTIFACT_FILES",
    "AUDIT_FILE",
    "EPISODES_PAGE_FILE",
    "LOG_FILE",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "REPORT_FILE",
    "RESULTS_FILE",
    "RUN_FILES",
    "SPILL_GLOB",
    "SUMMARY_FILE",
    "RunDir",
]

LOG_FILE: Final = "events.jsonl"
"""The event log: the run's only record, and its lock file (see effectbench.run.outdir)."""
RESULTS_FILE: Final = "results.jsonl"
MANIFEST_FILE: Final = "manifest.json"
METRICS_FILE: Final = "metrics.json"
SUMMARY_FILE: Final = "summary.md"
AUDIT_FILE: Final = "audit.json"
REPORT_FILE: Final = "report.html"
EPISODES_PAGE_FILE: Final = "episodes.html"
"""A run's episode list, written by ``effectbench view --static`` (docs/viewer.md)."""
ARTIFACT_FILES: Final = (RESULTS_FILE, MANIFEST_FILE, METRICS_FILE, SUMMARY_FILE)
"""The four derived files an artifact build writes, in manifest order."""
RUN_FILES: Final = frozenset(
    {LOG_FILE, *ARTIFACT_FILES, AUDIT_FILE, REPORT_FILE, EPISODES_PAGE_FILE}
)
"""Every file a run, its artifacts, its report, the viewer or an audit write. The one folder a run
makes is its screenshot store, ``blobs/sha256/`` (effectbench.core.evidence)."""
SPILL_GLOB: Final = ".results-*.spill"
"""Scratch files of an artifact build (results rows in plan order)."""


@attrs.frozen
class RunDir:
    """A run directory and the path of each file in it."""

    path: Path = attrs.field(converter=Path)

    @property
    def log(self) -> Path:
        return self.path / LOG_FILE

    @property
    def results(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def metrics(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY_FILE

    @property
    def audit(self) -> Path:
        return self.path / AUDIT_FILE

    @property
    def report(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def episodes_page(self) -> Path:
        return self.path / EPISODES_PAGE_FILE

    @property
    def lock(self) -> Path:
        """The log is the lock file: a run holds an flock on it while it owns the directory."""
        return self.log
