"""Where a report or a comparison is written: never over a file effectbench did not write.

Every page the report templates render carries ``GENERATOR`` in its head (``<meta
name="generator" content="effectbench ...">``). ``write_page`` replaces an existing file
only when its head carries it too, so ``report --out notes.txt`` refuses a user's file
instead of turning it into HTML, while rebuilding a report (rescore, a second
``compare``) replaces the page it wrote before. The bytes go to a fresh temp file beside
the target first (never a fixed ``<name>.tmp``, which could be someone's file too), then
take the target's name: linked when there was none (so a file that appeared meanwhile is
never clobbered), renamed over one that was checked.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Final

from effectbench.report.errors import ReportError

__all__ = ["GENERATOR", "write_page"]

GENERATOR: Final = b'<meta name="generator" content="effectbench'
"""What marks a file as one of ours, within its first ``_HEAD`` bytes."""
_HEAD: Final = 4096


def _ours(path: Path) -> bool:
    """Whether ``path`` (a regular file) begins like a page effectbench wrote."""
    try:
        with open(path, "rb") as f:
            return GENERATOR in f.read(_HEAD)
    except OSError:
        return False


def _refuse(target: Path, why: str) -> ReportError:
    return ReportError(
        f"{target} {why}; choose another --out or remove it (effectbench overwrites only a "
        "page it wrote)"
    )


def _check(target: Path) -> bool:
    """True when ``target`` exists and may be replaced; False when it does not exist."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ReportError(f"cannot write {target}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(target, "exists and is not a regular file")
    if not _ours(target):
        raise _refuse(target, "already exists and was not written by effectbench")
    return True


def write_page(target: Path, page: bytes) -> Path:
    """Write ``page`` (which must carry ``GENERATOR``) at ``target``; a ReportError, and
    nothing written, when ``target`` is a file effectbench did not write."""
    if GENERATOR not in page[:_HEAD]:
        raise ValueError("a page without the generator marker in its head")
    replace = _check(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise ReportError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(page)
        os.chmod(tmp, 0o644)
        if replace:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise _refuse(target, "appeared while it was being written") from None
    except OSError as exc:
        raise ReportError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target
