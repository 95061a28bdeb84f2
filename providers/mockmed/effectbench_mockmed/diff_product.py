"""MockMed's chart, for the diff pack: changing records, not only adding them.

One SQLite file per episode with three tables the product writes (patients, encounters,
billing) and an audit table it appends to on every change. One form endpoint takes
three actions: correct a patient's allergy (an update), retract an encounter entered
in error (a delete), record a visit with its billing line (a two-table insert). The
episode's fault decides what the save really does; the banner always says saved.

Routes (relative to ``/e/<token>/``): ``POST do`` (the form; answers with a page
carrying the save banner), ``GET api/state`` (the product's own JSON readback of
every table).
"""

from __future__ import annotations

import html
import shutil
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Final
from urllib.parse import parse_qsl

import aiohttp
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from effectbench.model import JSONScalar, Row, Snapshot
from effectbench.provider import ProductResponse, Telemetry
from effectbench_mockmed.client import read_banner

DDL: Final = (
    (
        "CREATE TABLE patients(id TEXT PRIMARY KEY, name TEXT, allergy TEXT, phone TEXT, "
        "updated_at INTEGER)"
    ),
    (
        "CREATE TABLE encounters(id INTEGER PRIMARY KEY AUTOINCREMENT, patient_id TEXT, "
        "type TEXT, note TEXT)"
    ),
    (
        "CREATE TABLE billing(id INTEGER PRIMARY KEY AUTOINCREMENT, encounter_id INTEGER, "
        "code TEXT, amount INTEGER)"
    ),
    (
        "CREATE TABLE audit(seq INTEGER PRIMARY KEY AUTOINCREMENT, action TEXT, target TEXT, "
        "detail TEXT)"
    ),
)
STALE_PHONE: Final = "555-0100"
"""What the stale form cache holds for p1's phone (the chart says 555-0199 since)."""
BASE_ROWS: Final[Mapping[str, tuple[Row, ...]]] = {
    "patients": (
        {
            "id": "p1",
            "name": "Ada Moreau",
            "allergy": "none known",
            "phone": "555-0199",
            "updated_at": 1,
        },
        {"id": "p2", "name": "Ada Morel", "allergy": "latex", "phone": "555-0102", "updated_at": 1},
    ),
    "encounters": (
        {"id": 1, "patient_id": "p1", "type": "Triage", "note": "entered in error: wrong chart"},
        {"id": 2, "patient_id": "p1", "type": "Follow-up", "note": "wound check, healing"},
    ),
    "billing": ({"id": 1, "encounter_id": 2, "code": "FU-01", "amount": 40},),
}
FAULTS: Final = ("ok", "stale", "homonym", "partial", "wrong_row", "noop")
"""``stale``: every save also rewrites p1 from a stale cache (its phone reverts);
``homonym``: an allergy lands on the namesake p2; ``partial``: a visit's billing line
is never written; ``wrong_row``: a retraction deletes the next encounter; ``noop``: a
retraction deletes nothing."""


def build_template(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        for statement in DDL:
            conn.execute(statement)
        for table, rows in BASE_ROWS.items():
            for row in rows:
                cols = list(row)
                marks = ", ".join("?" for _ in cols)
                conn.execute(
                    f"INSERT INTO {table}({', '.join(cols)}) VALUES ({marks})",
                    [row[c] for c in cols],
                )
    finally:
        conn.close()


class ChartStore:
    """The product's read-write connection to one episode's file, and its fault."""

    def __init__(self, path: Path, template: Path, fault: str) -> None:
        shutil.copyfile(template, path)
        self.path = path
        self.fault = fault
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA synchronous=OFF")

    def close(self) -> None:
        self._conn.close()

    def _audit(self, action: str, target: str, detail: str) -> None:
        self._conn.execute(
            "INSERT INTO audit(action, target, detail) VALUES (?, ?, ?)", (action, target, detail)
        )

    def _touch(self, patient_id: str) -> None:
        self._conn.execute(
            "UPDATE patients SET updated_at = updated_at + 1 WHERE id = ?", (patient_id,)
        )
        if self.fault == "stale":  # the save writes the form's stale copy of p1 back
            self._conn.execute("UPDATE patients SET phone = ? WHERE id = 'p1'", (STALE_PHONE,))

    def act(self, form: Mapping[str, str]) -> str:
        """Apply one form submission; the message of the banner (ValueError: bad input)."""
        action = form.get("action", "")
        with self._conn:
            self._conn.execute("BEGIN")
            if action == "update_allergy":
                return self._allergy(form)
            if action == "retract":
                return self._retract(form)
            if action == "record_visit":
                return self._visit(form)
        raise ValueError(f"unknown action {action!r}")

    def _allergy(self, form: Mapping[str, str]) -> str:
        patient = form.get("patient_id", "")
        allergy = form.get("allergy", "")
        if not allergy:
            raise ValueError("allergy is required")
        target = "p2" if self.fault == "homonym" and patient == "p1" else patient
        cur = self._conn.execute("UPDATE patients SET allergy = ? WHERE id = ?", (allergy, target))
        if cur.rowcount != 1:
            raise ValueError(f"no patient {patient!r}")
        self._touch(target)
        self._audit("update_allergy", target, allergy)
        return f"Allergy saved for {patient}"

    def _retract(self, form: Mapping[str, str]) -> str:
        try:
            encounter = int(form.get("encounter_id", ""))
        except ValueError:
            raise ValueError("encounter_id must be a number") from None
        target = encounter + 1 if self.fault == "wrong_row" else encounter
        if self.fault != "noop":
            self._conn.execute("DELETE FROM encounters WHERE id = ?", (target,))
        self._audit("retract", str(encounter), form.get("reason", ""))
        return f"Encounter {encounter} retracted"

    def _visit(self, form: Mapping[str, str]) -> str:
        patient = form.get("patient_id", "")
        try:
            amount = int(form.get("amount", ""))
        except ValueError:
            amount = None
        cur = self._conn.execute(
            "INSERT INTO encounters(patient_id, type, note) VALUES (?, ?, ?)",
            (patient, form.get("type", ""), form.get("note", "")),
        )
        if amount is not None and self.fault != "partial":
            self._conn.execute(
                "INSERT INTO billing(encounter_id, code, amount) VALUES (?, ?, ?)",
                (cur.lastrowid, form.get("code", ""), amount),
            )
        self._touch(patient)
        self._audit("record_visit", patient, form.get("note", ""))
        return "Visit saved"

    def state(self) -> dict[str, list[dict[str, JSONScalar]]]:
        out: dict[str, list[dict[str, JSONScalar]]] = {}
        for table in ("patients", "encounters", "billing", "audit"):
            cur = self._conn.execute(f"SELECT * FROM {table} ORDER BY rowid")
            cols = [d[0] for d in cur.description]
            out[table] = [dict(zip(cols, r)) for r in cur.fetchall()]
        return out


def _page(saved: bool, message: str) -> str:
    cls = "saved" if saved else "error"
    return f"<html><body><div id='banner' class='{cls}'>{html.escape(message)}</div></body></html>"


def build_app(stores: dict[str, ChartStore]) -> Starlette:
    """The chart app; ``stores`` maps an episode's token to its store."""

    def store_of(request: Request) -> ChartStore | None:
        return stores.get(request.path_params["token"])

    async def act(request: Request) -> Response:
        store = store_of(request)
        if store is None:
            return HTMLResponse(_page(False, "Unknown chart"), status_code=404)
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        try:
            message = store.act(form)
        except (ValueError, sqlite3.Error) as exc:
            return HTMLResponse(_page(False, str(exc)), status_code=400)
        return HTMLResponse(_page(True, message))

    async def state(request: Request) -> Response:
        store = store_of(request)
        if store is None:
            return Response(b"{}", status_code=404, media_type="application/json")
        return Response(orjson.dumps(store.state()), media_type="application/json")

    return Starlette(
        routes=[
            Route("/e/{token}/do", act, methods=["POST"]),
            Route("/e/{token}/api/state", state, methods=["GET"]),
        ]
    )


class ChartDriver:
    """Submits the chart's form the way a browser would (urlencoded POST)."""

    def __init__(self, session: aiohttp.ClientSession, telemetry: Telemetry) -> None:
        self._session = session
        self._telemetry = telemetry

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        form = {k: "" if v is None else str(v) for k, v in values.items()}
        async with self._session.post("do", data=form) as resp:
            status, page = resp.status, (await resp.read()).decode("utf-8", "replace")
        saved, message = read_banner(page)
        self._telemetry.action("submit_form", status=status, screen_says_saved=saved)
        return ProductResponse(screen_says_saved=saved, status=status, message=message)


class ChartReadback:
    """The product's own readback: one GET of every table as JSON."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def read(self) -> Snapshot:
        try:
            async with self._session.get("api/state") as resp:
                status, body = resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Snapshot.unreadable(f"readback request failed: {type(exc).__name__}: {exc}")
        if status != 200:
            return Snapshot.unreadable(f"readback answered HTTP {status}")
        parsed = orjson.loads(body)
        return Snapshot(readable=True, tables={t: tuple(rows) for t, rows in parsed.items()})
