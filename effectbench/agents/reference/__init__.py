"""Reference agents that run outside the harness process, as registered arms.

``node_effect_verified`` runs ``effect_verified.js`` under Node.js; ``py_effect_verified``
runs ``effect_verified.py`` under a system Python. Both speak the agent protocol and do
what the in-process ``effect_verified`` arm does, over MockMed's HTTP API. They are the
worked examples of docs/writing-an-arm.md. ``cdp_screen_only`` runs
``cdp_screen_only.py``, which does what ``browser_screen_only`` does, in the episode's
own browser context over the CDP endpoint the harness gives it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Final

from effectbench.agents.exec import ExecArm

HERE: Final = Path(__file__).resolve().parent
NODE_AGENT: Final = HERE / "effect_verified.js"
PYTHON_AGENT: Final = HERE / "effect_verified.py"
CDP_AGENT: Final = HERE / "cdp_screen_only.py"


def system_python() -> str:
    """A Python the sandbox can run: /usr/bin/python3 when there is one (a pyenv shim or
    a uv-managed Python may sit where the sandboxed user cannot read it), else ours."""
    usr = Path("/usr/bin/python3")
    return str(usr) if usr.exists() else sys.executable


class NodeEffectVerifiedArm(ExecArm):
    """effect_verified, as a Node.js program over the agent protocol."""

    def __init__(self) -> None:
        super().__init__(
            [shutil.which("node") or "node", str(NODE_AGENT)], name="node_effect_verified"
        )


class PyEffectVerifiedArm(ExecArm):
    """effect_verified, as a stand-alone Python program over the agent protocol."""

    def __init__(self) -> None:
        super().__init__([system_python(), str(PYTHON_AGENT)], name="py_effect_verified")


class CdpScreenOnlyArm(ExecArm):
    """browser_screen_only, as a stand-alone program driving its episode's browser over CDP."""

    def __init__(self) -> None:
        super().__init__([system_python(), str(CDP_AGENT)], name="cdp_screen_only", browser=True)


__all__ = [
    "CDP_AGENT",
    "NODE_AGENT",
    "PYTHON_AGENT",
    "CdpScreenOnlyArm",
    "NodeEffectVerifiedArm",
    "PyEffectVerifiedArm",
    "system_python",
]
