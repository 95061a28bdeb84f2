"""The one gate between a URL path (untrusted) and a file the viewer may read.

A path names a file inside the viewed folder or nothing: no ``..`` segment, no hidden
segment (``.git``, a report's temp file), no NUL or backslash, and no symbolic link that
resolves outside the folder. Everything the served viewer opens goes through
``inside``; tests/viewer/test_view_paths.py holds it to that for any string.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["inside", "url_parts"]


def url_parts(path: str) -> list[str] | None:
    """The segments of ``path`` (already percent-decoded), or None when one may not be
    followed: ``..``, a hidden name, NUL or a backslash."""
    if "\x00" in path or "\\" in path:
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if any(p.startswith(".") for p in parts):
        return None
    return parts


def inside(root: Path, path: str) -> Path | None:
    """The real path ``path`` names under ``root``, or None when it would leave ``root``
    (including through a link) or ``url_parts`` refuses it. Whether it exists is the
    caller's question."""
    parts = url_parts(path)
    if parts is None:
        return None
    base = os.path.realpath(root)
    try:
        target = os.path.realpath(os.path.join(base, *parts))
    except (OSError, ValueError):
        return None
    if target != base and not target.startswith(base.rstrip(os.sep) + os.sep):
        return None
    return Path(target)
