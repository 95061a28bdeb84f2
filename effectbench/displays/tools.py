"""What a display needs from the host, found once before anything starts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final

import attrs

from effectbench.core.errors import ConfigurationError

__all__ = ["REGISTRY", "DisplayTools", "DisplaysUnavailable", "find_tools", "vnc_tools"]

REQUIRED: Final = (("Xvfb", "xvfb"), ("dbus-daemon", "dbus"))
"""(executable, the Debian package that has it): without these there is no display."""
REGISTRY: Final = Path("/usr/libexec/at-spi2-registryd")
"""at-spi2-core's registry daemon; a display gets an accessibility bus when it is here."""


class DisplaysUnavailable(ConfigurationError):
    """The host lacks Xvfb or dbus-daemon; the message says what to install."""


@attrs.frozen
class DisplayTools:
    """The executables a display runs; ``a11y_config`` None: no accessibility bus here."""

    xvfb: str
    dbus_daemon: str
    registry: Path | None
    """None: no accessibility bus on this host (at-spi2-core is not installed)."""
    xprop: str | None
    """Publishes the accessibility bus on the root window (x11-utils); optional."""
    gdbus: str | None
    """Waits for the registry to own its name (libglib2.0-bin); optional."""
    xvnc: str | None = None
    """TigerVNC's X server (tigervnc-standalone-server): a display served over VNC."""
    vncpasswd: str | None = None
    """Writes Xvnc's password file (tigervnc-tools)."""


def find_tools() -> DisplayTools:
    """The host's display tools, or DisplaysUnavailable naming the apt-get command."""
    found = {exe: shutil.which(exe) for exe, _ in REQUIRED}
    missing = [(exe, pkg) for exe, pkg in REQUIRED if found[exe] is None]
    if missing:
        names = " and ".join(exe for exe, _ in missing)
        packages = " ".join(pkg for _, pkg in missing)
        raise DisplaysUnavailable(
            f"the display pool needs {names} on PATH: as root, apt-get install {packages} "
            "(at-spi2-core too, for the accessibility bus)"
        )
    xvfb, dbus_daemon = found["Xvfb"], found["dbus-daemon"]
    assert xvfb is not None and dbus_daemon is not None
    registry = REGISTRY if os.access(REGISTRY, os.X_OK) else None
    return DisplayTools(
        xvfb, dbus_daemon, registry, shutil.which("xprop"), shutil.which("gdbus"),
        shutil.which("Xvnc"), shutil.which("vncpasswd"),
    )  # fmt: skip


VNC_PACKAGES: Final = "tigervnc-standalone-server tigervnc-tools"


def vnc_tools(tools: DisplayTools) -> tuple[str, str]:
    """Xvnc and vncpasswd, or DisplaysUnavailable naming the apt-get command: a display
    served over VNC (the remote_display substrate) needs both."""
    if tools.xvnc is None or tools.vncpasswd is None:
        raise DisplaysUnavailable(
            "a display served over VNC needs Xvnc and vncpasswd on PATH: as root, "
            f"apt-get install {VNC_PACKAGES}"
        )
    return tools.xvnc, tools.vncpasswd
