"""Every version a result depends on, in one leaf module.

Read these attributes at call time (``versions.SCORING_VERSION``), not by importing the
names, so one bump (or a test's monkeypatch) reaches every artifact and the plan hash.
"""

from __future__ import annotations

from typing import Final

PACKAGE_VERSION: Final = "0.1.0"
"""The effectbench distribution's version."""
HARNESS_DISTRIBUTION: Final = "effectbench"
"""The distribution the harness ships as; an arm it ships is harness code (verify)."""
HARNESS_PACKAGES: Final = ("effectbench", "effectbench_mockmed")
"""The top-level packages of that distribution's wheel (pyproject.toml)."""

SPEC_VERSION: Final = "1.1.0"
"""Version of SPEC.md this code implements (semantic versioning, see SPEC.md section 10)."""

SCORING_VERSION: Final = "1.1.0"
"""Semantics of judge + classify + the episode fold. Stamped into every artifact a run or
a rescore writes, so two results compare only when it matches. Bump it like the spec:
major when a verdict or label can change for the same logged data, minor for additions
that cannot, patch for wording. 1.1.0 adds state diffs (``DiffEffect``)."""

SCORING_VERSIONS: Final = ("1.0.0", "1.1.0")
"""Every scoring version this code can rescore under: a log is judged by the version its
plan names (1.0.0: insert clauses only, a diff is an invalid effect there)."""

EVENTS_SCHEMA_MAJOR: Final = 1
EVENTS_SCHEMA_ID: Final = "effectbench.events/1"
"""The log line format (effectbench/schema/events.schema.json)."""

PLAN_SCHEMA: Final = "effectbench.plan/2"

ROW_DIGEST_FORM: Final = "effectbench.rowdigest/1"
"""The form of a digested snapshot row (``effectbench.oracles.digest``, docs/event-log.md):
its identity columns in clear plus ``"#"``, the first 32 hex digits of the sha256 of the
other columns' sorted-key JSON. A row holding ``#`` is in this form; a later form takes
another column name, so a log says which form it holds without a stamp. Not stamped
into plans: the judge reads a digested row as any other row, so a log without digests
(every log before it) is unchanged and rescores as it did."""


def harness_shipped(arm_version: object) -> bool:
    """An ``arm_versions`` entry names the harness's own distribution (harness code, to
    verify; the run gives it only to an arm whose class is in ``HARNESS_PACKAGES``)."""
    return isinstance(arm_version, str) and (
        arm_version == HARNESS_DISTRIBUTION or arm_version.startswith(f"{HARNESS_DISTRIBUTION}==")
    )
