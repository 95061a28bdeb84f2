"""Agents outside the harness process: the agent protocol, its arm, and containment.

See docs/agent-protocol.md. ``ExecArm`` runs any program that speaks the protocol;
``effectbench.agents.reference`` ships two such programs (Node.js and Python).
"""

from effectbench.agents.exec import (
    AgentExited,
    AgentFailure,
    AgentMalformed,
    AgentOverBudget,
    AgentStartFailed,
    AgentTimeout,
    ContainmentUnavailable,
    ExecArm,
)

__all__ = [
    "AgentExited",
    "AgentFailure",
    "AgentMalformed",
    "AgentOverBudget",
    "AgentStartFailed",
    "AgentTimeout",
    "ContainmentUnavailable",
    "ExecArm",
]
