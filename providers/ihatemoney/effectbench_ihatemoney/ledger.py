"""I Hate Money ledgers on this machine: one pristine ledger per run, one live copy per episode.

A ledger is a folder: ``ihatemoney.cfg`` (the product's own settings file, read through
``IHATEMONEY_SETTINGS_FILE_PATH``) and ``ihatemoney.db``, the SQLite system of record.
``build_pristine`` writes the settings and seeds the household world once per run
(``seed.py``, the product's own migrations and models, in a subprocess; ~2 s).
``Ledger.start`` copies that folder (``effectbench.providers_kit.fresh_copy``), points
the copy's settings at its own database and a fresh secret key, and serves it with the
product's Flask application on a fresh loopback port (``ProductProcess``: readiness on
``/healthcheck``, death with the harness).

The product would fetch exchange rates from the internet for a multi-currency bill; the
household has no currency (``XXX``), so it never converts, and its process is given a
proxy on a closed loopback port so that nothing it tries could leave the machine.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import anyio

from effectbench.providers_kit import ProductProcess, fresh_copy, installed_script, run_setup
from effectbench_ihatemoney.seed import plant_bill

__all__ = ["DB_NAME", "SETTINGS_NAME", "Ledger", "build_pristine", "serve_command"]

SETTINGS_NAME: Final = "ihatemoney.cfg"
DB_NAME: Final = "ihatemoney.db"
NOWHERE: Final = "http://127.0.0.1:9"
"""The discard port: an outbound HTTP(S) request of the product fails at once, locally."""


def settings(home: Path, secret: str) -> str:
    """The product's settings for the ledger at ``home`` (a Python file it executes)."""
    return "\n".join(
        (
            f"SQLALCHEMY_DATABASE_URI = {('sqlite:///' + str(home / DB_NAME))!r}",
            f"SECRET_KEY = {secret!r}",
            "ACTIVATE_DEMO_PROJECT = False",
            "ALLOW_PUBLIC_PROJECT_CREATION = False",
            "ACTIVATE_ADMIN_DASHBOARD = False",
            "SESSION_COOKIE_SECURE = False",  # plain HTTP on loopback
            "BABEL_DEFAULT_TIMEZONE = 'UTC'",
            "MAIL_DEFAULT_SENDER = 'Household <household@localhost>'",
            "",
        )
    )


def product_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    return {
        **env,
        "IHATEMONEY_SETTINGS_FILE_PATH": str(home / SETTINGS_NAME),  # set for the product
        "HTTP_PROXY": NOWHERE,
        "HTTPS_PROXY": NOWHERE,
        "PYTHONWARNINGS": "ignore",
    }


def build_pristine(home: Path) -> None:
    """Write the settings and seed the household ledger at ``home`` (blocking; ~2 s)."""
    home.mkdir(parents=True)
    (home / SETTINGS_NAME).write_text(settings(home, secrets.token_hex(16)), encoding="utf-8")
    seed = Path(__file__).with_name("seed.py")
    run_setup([sys.executable, str(seed)], "seeding the ledger", env=product_env(home))


def serve_command(port: int) -> list[str]:
    """The product's own Flask application, served by Flask's server on loopback."""
    flask = installed_script("flask", "effectbench-ihatemoney (make setup)")
    run = ["run", "--host", "127.0.0.1", "--port", str(port), "--no-reload", "--no-debugger"]
    return [flask, "--app", "ihatemoney.wsgi", *run, "--with-threads"]


class Ledger:
    """One episode's ledger: its folder and its Flask server, ``server`` (the kit's
    ``ProductProcess``: a free port, the readiness probe, death with the harness)."""

    def __init__(self, pristine: Path, home: Path) -> None:
        self._pristine = pristine
        self.home = home
        self.db = home / DB_NAME
        """The system of record: the copy's SQLite file."""
        self.server = ProductProcess(
            serve_command,
            ready_path="healthcheck",
            log=home / "server.log",
            label="I Hate Money server (flask run)",
            env=product_env(home),
            # Werkzeug's last words on a port another process took first
            port_taken=lambda tail: "in use by another program" in tail,
        )

    async def start(
        self, on_port: Callable[[str], None] | None = None, plant: str | None = None
    ) -> None:
        """Copy, configure (with the bill named ``plant`` added, when given) and serve; a
        port lost before the server binds it is replaced by a fresh one, and ``on_port``
        told the new upstream (the proxy forwards there)."""
        await anyio.to_thread.run_sync(self._copy, plant)
        await self.server.start(on_port)

    def _copy(self, plant: str | None) -> None:
        fresh_copy(self._pristine, self.home)
        (self.home / SETTINGS_NAME).write_text(
            settings(self.home, secrets.token_hex(16)), encoding="utf-8"
        )
        if plant is not None:
            plant_bill(self.db, plant)

    async def stop(self) -> None:
        """Stop the server and wait for it (so its port is free), then delete the folder."""
        await self.server.stop()
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.home, ignore_errors=True))
