"""The verifier: a run directory or a leaderboard submission, every label and metric re-derived.

One module per job: ``compare`` (the diff engine), ``run_check`` (a run directory),
``export`` (the submission writer), ``submission`` (the submission check).
"""

from effectbench.verify.compare import FLOAT_TOLERANCE, VerifyReport
from effectbench.verify.export import SEED_RULE, SUBMISSION_SCHEMA, export_submission
from effectbench.verify.run_check import verify_run
from effectbench.verify.submission import verify_submission

__all__ = [
    "FLOAT_TOLERANCE",
    "SEED_RULE",
    "SUBMISSION_SCHEMA",
    "VerifyReport",
    "export_submission",
    "verify_run",
    "verify_submission",
]
