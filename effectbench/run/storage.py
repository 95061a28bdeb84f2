"""The harness's own storage failing: a full disk, a read-only one, an exhausted quota.

Such an error is the harness's, never the episode's: an episode whose events or evidence
(a screenshot) cannot be written is left unfinished, with no terminal event, so ``run
--resume`` runs it again once space is freed, and the run stops at the first one
instead of failing every later episode the same way. The command ends with
``ExitCode.STORAGE`` and the one line of ``StorageError``.

Only the harness's writes are classified (the log, the evidence beside it, the
artifacts): a provider whose own database runs out of space fails its episode as an
``environment`` failure, as any provider error does.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Final

from effectbench.core.errors import EffectBenchError
from effectbench.core.exitcodes import ExitCode

__all__ = ["STORAGE_ERRNOS", "StorageError", "storage_cause"]

STORAGE_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT})
_REASONS: Final = {
    errno.ENOSPC: "No space left on device (the disk is full)",
    errno.EROFS: "the file system is read-only",
    errno.EDQUOT: "the disk quota is exhausted",
}


class StorageError(EffectBenchError):
    """The harness could not write its own files; the run stopped, resumable."""

    exit_code: Final = ExitCode.STORAGE

    def __init__(self, run_dir: Path, cause: OSError) -> None:
        where = os.fsdecode(cause.filename) if cause.filename is not None else str(run_dir)
        reason = _REASONS.get(cause.errno or 0, cause.strerror or str(cause))
        super().__init__(
            f"cannot write {where}: {reason}; the run stopped at the first such error and "
            "the episodes it cut off stay unfinished. Free space (or make it writable), then "
            f"continue with: effectbench run --resume {run_dir}"
        )
        self.cause = cause


def storage_cause(exc: BaseException | None) -> OSError | None:
    """The full-disk (read-only, quota) OSError behind ``exc``: itself, its cause or
    context chain, or inside an exception group; None when there is none."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, OSError) and item.errno in STORAGE_ERRNOS:
            return item
        if isinstance(item, StorageError):
            return item.cause
        if isinstance(item, BaseExceptionGroup):
            todo.extend(item.exceptions)
        todo.extend((item.__cause__, item.__context__))
    return None
