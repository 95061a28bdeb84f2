"""A package put first on ``PYTHONPATH`` in front of the installed one, so a CLI
subprocess meets a host without it (a wheel without its server, a broken provider)."""

from __future__ import annotations

from pathlib import Path


def shadow_package(site: Path, name: str, body: str = "") -> Path:
    """``site/name/__init__.py`` holding ``body``; returns ``site`` for PYTHONPATH."""
    package = site / name
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(body)
    return site
