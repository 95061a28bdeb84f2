"""Binary evidence (screenshots) beside the log, addressed by content hash.

An image is stored once under ``RUN/blobs/sha256/<hex>.png`` and the log event that
cites it carries the hex digest, so the hash chain covers the image: editing the file
breaks its digest and ``verify`` names it, and editing the digest breaks the chain.
The path is always derived from the digest, never read from the log, so a log cannot
point the verifier outside the run directory.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

BLOB_DIR: Final = "blobs/sha256"
MEDIA_TYPES: Final[Mapping[str, str]] = {"png": "image/png"}
_HEX: Final = re.compile(r"[0-9a-f]{64}")


def blob_path(digest: str, ext: str = "png") -> str:
    """Where a blob lives, relative to the run directory."""
    return f"{BLOB_DIR}/{digest}.{ext}"


def store_blob(run_dir: Path, data: bytes, ext: str = "png") -> tuple[str, str]:
    """Write ``data`` once (atomically: a reader never sees half an image); return
    (sha256 hex, path relative to ``run_dir``)."""
    digest = hashlib.sha256(data).hexdigest()
    rel = blob_path(digest, ext)
    target = run_dir / rel
    if target.is_file():
        return digest, rel
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return digest, rel


def screenshot_event(run_dir: Path, png: bytes, label: str) -> dict[str, Any]:
    """Store one screenshot and return its ``episode.screenshot`` event data."""
    digest, rel = store_blob(run_dir, png, "png")
    return {
        "sha256": digest,
        "path": rel,
        "bytes": len(png),
        "media_type": MEDIA_TYPES["png"],
        "label": label,
    }


def check_blob(run_dir: Path, data: Mapping[str, Any]) -> str | None:
    """Why the image an event cites is not the one recorded, or None when it is."""
    digest = data.get("sha256")
    if not isinstance(digest, str) or _HEX.fullmatch(digest) is None:
        return f"cites no valid sha256 ({digest!r})"
    rel = blob_path(digest, "png")
    if data.get("path") != rel:
        return f"names the path {data.get('path')!r}, not {rel!r} (the path comes from the hash)"
    path = run_dir / rel
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return f"{rel} is missing"
    except OSError as exc:
        return f"{rel} cannot be read ({exc.strerror or exc})"
    actual = hashlib.sha256(content).hexdigest()
    if actual != digest:
        return f"{rel} does not match its hash (sha256 {actual[:12]}..., edited after the run?)"
    return None
