"""The read-path ladder's three arms: one action, three ways to decide it worked.

All three submit the task's scripted solution once through ``env.driver`` and differ
only in what they read afterwards; they make the baselines' two decisions
(``effectbench.arms.baselines.trust_screen`` / ``trust_reads``) over other read paths,
with a driver error counted as an error page ("not saved") rather than an arm failure:

- ``screen`` trusts the save banner (``ProductResponse.screen_says_saved``); an error
  page, a 409, a 401 or a save that never answered is "not saved".
- ``effect_rest`` reads the product's own record readback
  (``env.product_effect_verifier()``) before and after, and judges the declared
  effect on what it shows.
- ``effect_full`` reads every table of the database, read-only, before and after,
  through the ``sqlite_ro_path`` channel a provider may offer, and judges the declared
  effect, stray writes to other tables included.

Each claims success only on its own evidence and halts otherwise. Without its read
path (or without a declared effect) a verifying arm still acts, then fails safe:
reports failure and halts, since an unverified success claim is what SWER counts.
They are generic: TaskView and EnvHandle only.
"""

from __future__ import annotations

from typing import Final

import anyio.to_thread

from effectbench.arms.baselines import Reader, trust_reads, trust_screen
from effectbench.core.arm import TaskView
from effectbench.core.model import AgentReport, Snapshot
from effectbench.core.provider import EnvHandle, ProductResponse
from effectbench.oracles.sqlite import read_all_tables

__all__ = ["SQLITE_RO_CHANNEL", "EffectFullArm", "EffectRestArm", "ScreenArm"]

SQLITE_RO_CHANNEL: Final = "sqlite_ro_path"


async def _submit(task: TaskView, env: EnvHandle) -> ProductResponse:
    """One submission; a driver error is what the user sees as an error page."""
    assert task.solution is not None and env.driver is not None
    try:
        return await env.driver.submit(task.solution)
    except Exception as exc:  # noqa: BLE001 - an error page is "not saved", not an arm crash
        env.telemetry.action("submit_error", error=f"{type(exc).__name__}: {exc}"[:300])
        return ProductResponse(screen_says_saved=False, status=None, message=str(exc)[:200])


class ScreenArm:
    """``screen_only``'s decision (success exactly when the banner says saved), with a
    driver error counted as an error page."""

    name: str = "screen"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        return await trust_screen(task, env, _submit)


class EffectRestArm:
    """Trusts the product's own readback (one REST read path) for the declared effect."""

    name: str = "effect_rest"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        verifier = env.product_effect_verifier()
        reader = None if verifier is None else verifier.read
        return await trust_reads(task, env, reader, "product readback", _submit)


class EffectFullArm:
    """Trusts a read-only read of every table the database's schema lists."""

    name: str = "effect_full"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        path = env.channels.get(SQLITE_RO_CHANNEL)
        reader: Reader | None = None
        if path:
            db_path = path

            async def read() -> Snapshot:
                return await anyio.to_thread.run_sync(read_all_tables, db_path)

            reader = read
        return await trust_reads(task, env, reader, "read-only read of every table", _submit)
