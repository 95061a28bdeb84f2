"""The static HTML report of a run (``effectbench report``) and of runs side by side
(``effectbench compare``): one self-contained file built from artifacts and the log.

Modules, one job each: ``data`` (the model extracted from the artifacts), ``drill``
(one episode from the log), ``filmstrip`` (its screenshots replayed with its
actions), ``charts`` (SVG geometry), ``render`` (templates to
bytes), ``page`` (one run's report), ``compare`` (several runs).
"""

from __future__ import annotations

from effectbench.report.data import ReportError
from effectbench.report.page import REPORT_FILE, build_report

__all__ = ["REPORT_FILE", "ReportError", "build_report"]
