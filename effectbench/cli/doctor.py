"""``effectbench doctor``: what this host has of what EffectBench can use, and what to
install for each piece that is missing.

Each check is one small function over the host (``PATH``, installed packages, the same
probes a run makes: ``find_chromium``, the sandbox's ``probe``, the PostgreSQL wheel's
``bin_dir``). Only the default run's needs (MockMed and the two baseline arms) are
required: the command exits 1 when one is missing, 0 otherwise, however many optional
pieces are absent (docs/exit-codes.md).
"""

from __future__ import annotations

import glob
import shutil
from collections.abc import Callable
from typing import Final

import attrs
import click

from effectbench.cli.listing import emit_json, json_option, text_table

__all__ = ["CHECKS", "Check", "Finding", "doctor", "run_checks"]


@attrs.frozen
class Finding:
    """What one check found: where the piece is, or what to do to get it."""

    ok: bool
    detail: str
    apt: str | None = None
    """The Debian package that provides it, when that is how it is installed."""


@attrs.frozen
class Check:
    name: str
    needed_for: str
    probe: Callable[[], Finding]
    required: bool = False


def _default_run() -> Finding:
    from effectbench.run.options import DEFAULTS
    from effectbench.run.registry import PluginError, Registry

    registry = Registry()
    try:
        registry.provider(DEFAULTS.provider)
        for arm in DEFAULTS.arms:
            registry.arm(arm)
    except PluginError as exc:
        return Finding(False, f"{exc}; reinstall effectbench (make setup, or pip install .)")
    return Finding(True, f"{DEFAULTS.provider}, {', '.join(DEFAULTS.arms)} load")


def _chromium() -> Finding:
    from effectbench.browser import BrowserUnavailable, find_chromium

    try:
        return Finding(True, find_chromium())
    except BrowserUnavailable as exc:
        return Finding(False, str(exc), apt="chromium")


def _playwright() -> Finding:
    from effectbench.browser import BrowserUnavailable
    from effectbench.browser.launch import require_playwright

    try:
        require_playwright()
    except BrowserUnavailable as exc:
        return Finding(False, str(exc))
    return Finding(True, "the browser extra is installed")


def _program(*names: str, apt: str) -> Callable[[], Finding]:
    def probe() -> Finding:
        for name in names:
            found = shutil.which(name)
            if found is not None:
                return Finding(True, found)
        return Finding(False, f"no {' or '.join(names)} on PATH: apt-get install {apt}", apt)

    return probe


def _bubblewrap() -> Finding:
    from effectbench.agents.sandbox import probe

    found = probe()
    if found.available:
        return Finding(True, found.bwrap or "bubblewrap")
    apt = None if shutil.which("bwrap") else "bubblewrap"
    hint = f": apt-get install {apt}" if apt else ""
    return Finding(False, f"{found.reason}{hint}", apt)


def _postgres_wheel() -> Finding:
    from effectbench.postgres.server import PgConfigError, bin_dir

    try:
        return Finding(True, str(bin_dir()))
    except PgConfigError as exc:
        return Finding(False, str(exc))


def _installed(pattern: str, what: str, apt: str) -> Callable[[], Finding]:
    """A piece found by a path a Debian package installs (not on PATH)."""

    def probe() -> Finding:
        found = sorted(glob.glob(pattern))
        if found:
            return Finding(True, found[0])
        return Finding(False, f"no {what}: apt-get install {apt}", apt)

    return probe


def _vnc_server() -> Finding:
    """TigerVNC's Xvnc and vncpasswd: both, as the display pool needs them."""
    from effectbench.displays.tools import VNC_PACKAGES

    xvnc, vncpasswd = shutil.which("Xvnc"), shutil.which("vncpasswd")
    if xvnc is not None and vncpasswd is not None:
        return Finding(True, xvnc)
    return Finding(
        False, f"no Xvnc and vncpasswd on PATH: apt-get install {VNC_PACKAGES}", VNC_PACKAGES
    )


def _ocr_model() -> Finding:
    from effectbench.displays.ocr import OcrUnavailable, tessdata

    try:
        return Finding(True, str(tessdata() / "eng.traineddata"))
    except OcrUnavailable as exc:
        return Finding(False, str(exc), "tesseract-ocr-eng")


_DISPLAY: Final = "desktop and remote_display tasks (a virtual display)"

CHECKS: Final = (
    Check("default run", "effectbench run with no options", _default_run, required=True),
    Check("Chromium", "browser arms, CDP agents, the report's tests", _chromium),
    Check("Playwright", "browser arms (the browser extra)", _playwright),
    Check("Node.js", "node_effect_verified, Node agents", _program("node", apt="nodejs")),
    Check("bubblewrap", "--isolate (contained agents)", _bubblewrap),
    Check("PostgreSQL wheel", "mockmed-pg without --pg-dsn", _postgres_wheel),
    Check("Xvfb", _DISPLAY, _program("Xvfb", apt="xvfb")),
    Check("D-Bus", _DISPLAY, _program("dbus-daemon", apt="dbus")),
    Check("VNC server", "remote_display tasks (TigerVNC's Xvnc)", _vnc_server),
    Check(
        "python3-gi",
        "MockMed's desktop client (GTK 3)",
        _installed("/usr/lib/python3/dist-packages/gi/__init__.py", "python3-gi", "python3-gi"),
    ),
    Check(
        "at-spi2-core",
        "desktop tasks (the accessibility bus's registry)",
        _installed("/usr/libexec/at-spi2-registryd", "at-spi2-registryd", "at-spi2-core"),
    ),
    Check("OCR model", "remote_display's pixel drivers (tesseract's English)", _ocr_model),
)
"""Every check, in the order printed."""


def run_checks() -> list[tuple[Check, Finding]]:
    return [(check, check.probe()) for check in CHECKS]


def _summary(found: list[tuple[Check, Finding]]) -> list[str]:
    """The closing lines: whether the default run can go, and one install command for
    the optional pieces Debian packages."""
    missing = [c.name for c, f in found if c.required and not f.ok]
    lines = [
        f"the default run cannot start: fix the MISSING row above ({', '.join(missing)})"
        if missing
        else "everything the default run needs is here"
    ]
    apt = sorted({f.apt for c, f in found if not f.ok and f.apt})
    if apt:
        lines.append(f"for the optional pieces missing: apt-get install {' '.join(apt)}")
    return lines


@click.command()
@json_option
def doctor(as_json: bool) -> int:
    """Check what this host has of what EffectBench can use (Chromium, Node.js, bubblewrap,
    the PostgreSQL wheel, the display packages) and say what to install for each missing
    one; exit 1 only when the default run cannot start."""
    found = run_checks()
    if as_json:
        emit_json(
            [
                {"check": c.name, "ok": f.ok, "required": c.required, "for": c.needed_for}
                | {"detail": f.detail, "apt": f.apt}
                for c, f in found
            ]
        )
    else:
        rows = [
            (c.name, "ok" if f.ok else "MISSING" if c.required else "missing", c.needed_for,
             f.detail)
            for c, f in found
        ]  # fmt: skip
        click.echo(text_table(("CHECK", "STATUS", "NEEDED FOR", "FOUND / TO DO"), rows))
        for line in _summary(found):
            click.echo(line)
    return 1 if any(c.required and not f.ok for c, f in found) else 0
