"""The adversarial audit: the roster, the report, the checks, the mutation score, the
attester, the runner (one module each; the command is ``effectbench.cli.audit``).

This ``__init__`` is also the old module ``effectbench.audit``: its names warn
(DeprecationWarning) and go in effectbench 0.3 (docs/deprecations.md). It imports nothing
until an old name is asked for, so importing a light submodule (attest.py) does not load
the checks, and the audit's layer does not depend on the runner or the CLI above it.
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.audit.checks": (
            "AuditError",
            "attestations",
            "audit_log",
            "is_refusal_control",
        ),
        "effectbench.arms.adversaries": ("DIFF_ADVERSARY_NAMES",),
        "effectbench.audit.report": (
            "AUDITED",
            "AUDIT_FILE",
            "AuditReport",
            "BROKEN",
            "GAMEABLE",
            "INCOMPLETE",
            "INERT",
            "LEAKY",
            "TaskAudit",
            "UNTESTED",
            "WEAK",
            "format_audit",
        ),
        "effectbench.audit.roster": (
            "AUDIT_ARMS",
            "DEFAULT_TRIALS",
            "DO_NOTHING_ADVERSARIES",
            "EXEMPT_ON_CONTROL",
            "WRITING_ADVERSARIES",
            "audit_arms",
            "fixed_fields",
            "value_arm_names",
        ),
        "effectbench.audit.runner": ("audit_provider",),
        "effectbench.cli.audit": ("audit_cli_main",),
    },
)
