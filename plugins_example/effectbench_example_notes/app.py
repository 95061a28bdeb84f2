"""The product under test: a tiny notes app over its own SQLite file.

It stands in for whatever your real system is. Two things make it useful to a
benchmark: every episode gets its own database file, and its save path can be told
to misbehave (``Fault``) while still telling the user "Saved". The driver and the
readback at the bottom are the two channels an arm is given into it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

import anyio.to_thread
import attrs

from effectbench.model import JSONScalar, Row, Snapshot
from effectbench.provider import ProductResponse

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT "
    "NOT NULL)"
)
BODY_LIMIT = 16
"""How many characters of a body the ``truncate_body`` fault keeps (a too-short column)."""


class Fault(StrEnum):
    """What the save path does wrong in this episode (set per task in ``TaskSpec.fixture``)."""

    NONE = "none"
    TRUNCATE_BODY = "truncate_body"


@attrs.frozen
class SaveResult:
    """What the app shows after Save: its claim, which a fault may make false."""

    saved: bool
    message: str


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit mode, so every write below opens its own BEGIN IMMEDIATE explicitly.
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    conn.row_factory = sqlite3.Row
    return conn


class NotesApp:
    """One episode's instance of the product. Blocking SQLite work runs in a worker thread."""

    def __init__(self, path: Path, fault: Fault) -> None:
        self.path = path
        self.fault = fault

    @classmethod
    async def create(
        cls, path: Path, fault: Fault, seed: Mapping[str, tuple[Row, ...]]
    ) -> NotesApp:
        """Create the database file, its schema and the task's initial rows."""

        def build() -> None:
            conn = _connect(path)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(SCHEMA)
                conn.execute("BEGIN IMMEDIATE")
                for row in seed.get("notes", ()):
                    conn.execute(
                        "INSERT INTO notes (id, title, body) VALUES (?, ?, ?)",
                        (row["id"], row["title"], row["body"]),
                    )
                conn.execute("COMMIT")
            finally:
                conn.close()

        await anyio.to_thread.run_sync(build)
        return cls(path, fault)

    async def save(self, title: str, body: str) -> SaveResult:
        """Save a new note. Under ``TRUNCATE_BODY`` the body is cut, and the app still says
        saved."""
        stored = body[:BODY_LIMIT] if self.fault is Fault.TRUNCATE_BODY else body

        def write() -> None:
            conn = _connect(self.path)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO notes (title, body) VALUES (?, ?)", (title, stored))
                conn.execute("COMMIT")
            finally:
                conn.close()

        try:
            await anyio.to_thread.run_sync(write)
        except sqlite3.Error as exc:
            return SaveResult(saved=False, message=f"Could not save: {exc}")
        return SaveResult(saved=True, message="Saved")

    async def list_notes(self) -> tuple[Row, ...]:
        """The app's own "all notes" screen, read through its own connection."""

        def read() -> tuple[Row, ...]:
            conn = _connect(self.path)
            try:
                return tuple(
                    dict(r) for r in conn.execute("SELECT id, title, body FROM notes ORDER BY id")
                )
            finally:
                conn.close()

        return await anyio.to_thread.run_sync(read)


class NotesDriver:
    """ProductDriver: one user-level Save with the given field values, through the app."""

    def __init__(self, app: NotesApp) -> None:
        self._app = app

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        title, body = values.get("title"), values.get("body")
        if not isinstance(title, str) or not isinstance(body, str) or not title:
            return ProductResponse(
                screen_says_saved=False, message="A note needs a title and a body"
            )
        result = await self._app.save(title, body)
        return ProductResponse(screen_says_saved=result.saved, message=result.message)


class NotesReadback:
    """ProductVerifier: the app's own list of notes, offered to arms that check their work.

    It is the product's read path, not the harness oracle: a provider for a real system
    authors it only if the product really has one.
    """

    def __init__(self, app: NotesApp) -> None:
        self._app = app

    async def read(self) -> Snapshot:
        try:
            notes = await self._app.list_notes()
        except sqlite3.Error as exc:
            return Snapshot.unreadable(f"notes app readback failed: {exc}")
        return Snapshot(readable=True, tables={"notes": notes})
