"""Roundup trackers on this machine: one pristine tracker per run, one live copy per episode.

``build_pristine`` runs ``roundup-admin install`` and ``initialise`` once and seeds the
help-desk world (``seed.py``, run by the tracker's own Python API in a subprocess).
``Tracker.start`` copies that folder (~15 ms), points its ``web`` URL at the episode's
fault proxy (Roundup writes absolute form actions and redirects from it, so a wrong URL
lets the next submission bypass the proxy), sets the CSRF variant, and starts
``roundup-server`` on a fresh port.

A server must never outlive the harness: ``effectbench.providers_kit.ProductProcess``
starts each one with ``PR_SET_PDEATHSIG = SIGKILL`` (Linux), from the event loop's
thread, so when the harness process dies, even by SIGKILL, the kernel kills its servers.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import anyio

from effectbench.core.children import die_with_parent
from effectbench.providers_kit import ProductProcess, fresh_copy, installed_script, run_setup

__all__ = ["NAME", "Tracker", "build_pristine", "die_with_parent", "roundup_bin"]

NAME: Final = "tp"
"""The tracker's name in its URL (``/tp/``)."""
ADMIN_PASSWORD: Final = "admin-pw-effectbench"
PBKDF2_ROUNDS: Final = 1000
"""Roundup's default (250,000) costs ~0.2 s of CPU per login; these are throwaway trackers."""
MODE: Final = "thread"
"""roundup-server's multiprocess mode. The default, fork, forks a child per request that
opens the tracker and compiles its templates again every time (0.11-0.25 s a page here,
against 0.06-0.10 s in thread mode, which keeps them); a one-user episode gains
nothing from fork's isolation."""
_WEB: Final = re.compile(r"^web = .*$", re.MULTILINE)
_CSRF: Final = re.compile(r"^csrf_enforce_token = .*$", re.MULTILINE)


def roundup_bin(name: str) -> str:
    """A Roundup script installed beside this interpreter (the venv's ``bin``)."""
    return installed_script(name, "effectbench-roundup (make setup)")


def _run(args: list[str], what: str) -> None:
    run_setup(args, what)


def build_pristine(home: Path) -> None:
    """Install, initialise and seed one tracker at ``home`` (blocking; ~1.5 s)."""
    options = ",".join(
        (
            "tracker_web=http://127.0.0.1:1/tp/",
            "mail_domain=localhost",
            "mail_host=localhost",
            f"password_pbkdf2_default_rounds={PBKDF2_ROUNDS}",
            "mail_debug=mail.log",
        )
    )
    admin = roundup_bin("roundup-admin")
    _run([admin, "-i", str(home), "install", "classic", "sqlite", options], "roundup-admin install")
    _run([admin, "-i", str(home), "initialise", ADMIN_PASSWORD], "roundup-admin initialise")
    seed = Path(__file__).with_name("seed.py")
    _run([sys.executable, str(seed), str(home)], "seeding the tracker")


def configure(home: Path, web: str, csrf: bool) -> None:
    """Point the copy at its proxy and set its CSRF variant."""
    config = home / "config.ini"
    text = config.read_text(encoding="utf-8")
    text = _WEB.sub(f"web = {web}", text, count=1)
    text = _CSRF.sub(f"csrf_enforce_token = {'yes' if csrf else 'no'}", text, count=1)
    config.write_text(text, encoding="utf-8")


class Tracker:
    """One episode's tracker: its folder and its ``roundup-server`` process (the kit's
    ``ProductProcess``: a free port, the readiness probe, death with the harness)."""

    def __init__(self, pristine: Path, home: Path) -> None:
        self._pristine = pristine
        self.home = home
        self._server = ProductProcess(
            self._command,
            ready_path=f"{NAME}/",
            log=home / "server.log",
            label="Roundup tracker (roundup-server)",
            env={**os.environ, "SENDMAILDEBUG": str(home / "mail.log")},
            port_taken=lambda tail: "Unable to bind" in tail,
        )

    @property
    def port(self) -> int:
        return self._server.port

    @port.setter
    def port(self, port: int) -> None:
        """Before ``start``: serve on ``port`` first (a test takes it to force a retry)."""
        self._server.port = port

    @property
    def upstream(self) -> str:
        """The server's own origin (the proxy forwards here)."""
        return self._server.upstream

    @property
    def pid(self) -> int | None:
        return self._server.pid

    def gone(self) -> str | None:
        """Why the episode's roundup-server is no longer serving, or None while it runs."""
        return self._server.gone()

    def _command(self, port: int) -> list[str]:
        args = [roundup_bin("roundup-server")]
        if os.geteuid() == 0:
            args += ["-u", "root"]  # roundup-server refuses to run as root otherwise
        return [*args, "-t", MODE, "-n", "127.0.0.1", "-p", str(port), f"{NAME}={self.home}"]

    async def start(
        self, web: str, csrf: bool, on_port: Callable[[str], None] | None = None
    ) -> None:
        """Copy, configure and serve. The port is picked free but not held (roundup-server
        binds it itself), so another process can take it first: then a fresh port is
        tried, and ``on_port`` is told the new upstream URL (the proxy forwards there)."""
        await anyio.to_thread.run_sync(self._copy, web, csrf)
        await self._server.start(on_port)

    def _copy(self, web: str, csrf: bool) -> None:
        fresh_copy(self._pristine, self.home)
        configure(self.home, web, csrf)

    async def stop(self) -> None:
        """Stop the server and wait for it (so its port is free), then delete the folder."""
        await self._server.stop()
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.home, ignore_errors=True))
