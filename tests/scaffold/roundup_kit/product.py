"""Stock Roundup 2.6.0 as the ``--product`` kit's product: what an author writes in the
generated ``product.py`` to wrap it (tests/scaffold/test_scaffold.py copies this file and
``tasks.py`` over the generated ones and deletes the stand-in product).

The tracker is installed and seeded once per run (effectbench_roundup's help-desk world),
each episode's copy is pointed at its fault proxy, and ``roundup-server`` serves it. A user
signs in with the login form and submits the item form (effectbench_roundup's web client);
the readback is the tracker's own pages, in the oracle's shape for the one column these
tasks change (``_issue._title``).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import aiohttp
from effectbench_roundup.client import IssueReadback, TrackerDriver, _Browser
from effectbench_roundup.tracker import NAME, build_pristine, roundup_bin
from effectbench_roundup.tracker import configure as configure_tracker

from effectbench.model import JSONScalar, Snapshot
from effectbench.provider import ProductResponse, Telemetry

LABEL: Final = "Roundup tracker (roundup-server)"
BASE_PATH: Final = f"{NAME}/"
READY_PATH: Final = f"{NAME}/"
DATABASE: Final = "db/db"
USER, PASSWORD = "helpdesk", "helpdesk-pw"


def new_secret() -> str:
    return secrets.token_urlsafe(18)


def configure(home: Path, base_url: str, secret: str) -> None:
    configure_tracker(home, base_url, csrf=True)


def command(home: Path, port: int) -> list[str]:
    root = ["-u", "root"] if os.geteuid() == 0 else []
    return [
        roundup_bin("roundup-server"),
        *root,
        "-t",
        "thread",
        "-n",
        "127.0.0.1",
        "-p",
        str(port),
        f"{NAME}={home}",
    ]


def port_taken(log_tail: str) -> bool:
    return "Unable to bind" in log_tail


User = _Browser


async def sign_in(http: aiohttp.ClientSession, base_url: str, secret: str) -> User:
    user = _Browser(http, base_url, USER, PASSWORD)
    await user.login()
    return user


async def submit(user: User, values: Mapping[str, JSONScalar]) -> ProductResponse:
    return await TrackerDriver(user, Telemetry()).submit(values)


async def read_back(user: User) -> Snapshot:
    shown = await IssueReadback(user).read()
    if not shown.readable:
        return shown
    rows = tuple({"id": row["id"], "_title": row["title"]} for row in shown.rows("issue"))
    return Snapshot(readable=True, tables={"_issue": rows})


__all__ = ["User", "build_pristine"]
