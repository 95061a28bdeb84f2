"""No tracked text file holds a merge's conflict markers: one reached docs/ on main once
(docs/computer-use.md), and nothing else reads prose closely enough to notice."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(rb"^(<{7} |={7}$|>{7} )", re.MULTILINE)
TEXT = (".md", ".py", ".toml", ".txt", ".html", ".css", ".js", ".json", ".cfg", ".sh")


def _tracked() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    names = [n for n in out.decode().split("\0") if n.endswith(TEXT) or n == "Makefile"]
    return [ROOT / n for n in names if (ROOT / n).is_file()]


def _line(text: bytes, offset: int) -> int:
    return text.count(b"\n", 0, offset) + 1


def test_tracked_files_have_no_conflict_markers() -> None:
    files = _tracked()
    assert any(f.name == "README.md" for f in files)  # the listing itself worked
    marked = [
        f"{f.relative_to(ROOT)}:{_line(text, m.start())}"
        for f in files
        for text in (f.read_bytes(),)
        for m in MARKER.finditer(text)
    ]
    assert not marked, "merge conflict markers left in: " + ", ".join(marked)
