"""The harness's oracle over one episode's tracker: SQLite (read-only) plus the file store.

Roundup keeps issues and links in SQLite (WAL mode) but a message's text in a file,
``db/files/msg/<id // 1000>/msg<id>``; the oracle reads both. Every live message is a
``msg`` row, one linked to no issue too (``issue`` null), so a stray message is seen; a
link row naming no live issue (or nothing) is a ``dangling`` row, a table the snapshot
holds only when there is one. It opens the
database with ``mode=ro`` on every read (the tracker is written by another process, and a
read-only URI can never write it), and never goes through the web server.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from effectbench.model import Row, Snapshot

__all__ = ["ISSUE_COLUMNS", "TrackerOracle", "read_tracker"]

ISSUE_COLUMNS: Final = (
    "id", "title", "status", "priority", "assignedto", "superseder", "messages", "last_note",
)  # fmt: skip

_ISSUES: Final = """
SELECT i.id, i._title, s._name, p._name, u._username
FROM _issue i
LEFT JOIN _status s ON s.id = i._status
LEFT JOIN _priority p ON p.id = i._priority
LEFT JOIN _user u ON u.id = i._assignedto
WHERE i.__retired__ = 0
ORDER BY i.id
"""
_LINKS: Final = "SELECT nodeid, linkid FROM {table} ORDER BY nodeid, linkid"
_LIVE_MSGS: Final = "SELECT id FROM _msg WHERE __retired__ = 0"
_LINK_TABLES: Final = ("issue_messages", "issue_superseder")


def _links(
    rows: list[tuple[object, object]], table: str, issues: set[int]
) -> tuple[dict[int, list[int]], list[Row]]:
    """A link table's links per live issue, and the rows that link no live issue or
    nothing (``dangling``: Roundup never leaves one, so a row there is a stray write)."""
    out: dict[int, list[int]] = {}
    dangling: list[Row] = []
    for node, link in rows:
        if isinstance(node, int) and isinstance(link, int) and node in issues:
            out.setdefault(node, []).append(link)
        else:
            dangling.append({"table": table, "nodeid": _plain(node), "linkid": _plain(link)})
    return out, dangling


def _plain(value: object) -> int | str | None:
    return value if value is None or isinstance(value, (int, str)) else repr(value)


def _message_text(home: Path, msg_id: int) -> str | None:
    path = home / "db" / "files" / "msg" / str(msg_id // 1000) / f"msg{msg_id}"
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None


def read_tracker(home: Path) -> Snapshot:
    """The tracker at ``home`` as plain rows: ``issue``, ``msg`` (and ``dangling``, if any)."""
    db = home / "db" / "db"
    if not db.exists():
        return Snapshot.unreadable(f"no tracker database at {db}")
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        return Snapshot.unreadable(f"cannot open the tracker database: {exc}")
    try:
        issues = conn.execute(_ISSUES).fetchall()
        issue_ids = {int(r[0]) for r in issues}
        links = {t: conn.execute(_LINKS.format(table=t)).fetchall() for t in _LINK_TABLES}
        messages, dangling = _links(links["issue_messages"], "issue_messages", issue_ids)
        supersede, stray = _links(links["issue_superseder"], "issue_superseder", issue_ids)
        live = {int(r[0]) for r in conn.execute(_LIVE_MSGS)}
    except sqlite3.Error as exc:
        return Snapshot.unreadable(f"tracker database unreadable: {exc}")
    finally:
        conn.close()
    issue_rows: list[Row] = []
    msg_rows: dict[int, Row] = {}
    for issue_id, title, status, priority, assignee in issues:
        ids = [m for m in messages.get(int(issue_id), []) if m in live]
        texts = {m: _message_text(home, m) for m in ids}
        for m in ids:
            msg_rows.setdefault(m, {"id": m, "issue": int(issue_id), "content": texts[m]})
        issue_rows.append(
            {
                "id": int(issue_id),
                "title": title,
                "status": status,
                "priority": priority,
                "assignedto": assignee,
                "superseder": ",".join(str(s) for s in supersede.get(int(issue_id), [])),
                "messages": len(ids),
                "last_note": texts[max(ids)] if ids else None,
            }
        )
    for m in live - msg_rows.keys():  # a message on no issue is still a message written
        msg_rows[m] = {"id": m, "issue": None, "content": _message_text(home, m)}
    rows = tuple(msg_rows[m] for m in sorted(msg_rows))
    tables = {"issue": tuple(issue_rows), "msg": rows}
    if dangling or stray:
        tables["dangling"] = (*dangling, *stray)
    return Snapshot(readable=True, tables=tables)


class TrackerOracle:
    """Reads one episode's tracker; never raises for an unreadable store."""

    def __init__(self, home: Path) -> None:
        self._home = home

    async def read(self) -> Snapshot:
        import anyio

        return await anyio.to_thread.run_sync(read_tracker, self._home)
