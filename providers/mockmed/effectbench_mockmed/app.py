"""The MockMed product: an HTML form UI with a save banner, and a JSON API.

Every episode lives under ``/e/<token>/`` where the token is unguessable and maps to
that episode's own store and fault mode, so concurrent episodes share no mutable
state beyond the token table itself.

Routes (relative to ``/e/<token>/``):

- ``GET  ``                 the encounter form
- ``POST encounters``       form submit; answers with a page carrying the save banner
- ``GET  records``          the chart's encounters as a page (what a person checks after saving)
- ``GET  api/encounters``   JSON readback of every encounter (the product's own read path)
- ``POST api/encounters``   JSON write, same backend and same fault as the form
"""

from __future__ import annotations

import html
import inspect
from collections.abc import Awaitable, Mapping
from typing import Final, Protocol, TypeVar
from urllib.parse import parse_qsl

import anyio
import attrs
import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from effectbench.model import JSONScalar
from effectbench_mockmed.faults import Fault
from effectbench_mockmed.store import TABLE, StoreSchema, Submission

ENCOUNTER_TYPES: Final[tuple[str, ...]] = ("Triage", "Urgent", "Follow-up")
STATUSES: Final[tuple[str, ...]] = ("submitted", "draft")
PATIENTS: Final[Mapping[str, str]] = {"p1": "Ada Moreau (referred)", "p2": "Ada Morel"}
MAX_BODY: Final = 64 * 1024

_T = TypeVar("_T")
_Rows = list[dict[str, JSONScalar]]


class Store(Protocol):
    """What the app needs of a store: SQLite's answers at once, PostgreSQL's are awaited."""

    @property
    def schema(self) -> StoreSchema: ...

    def write(self, sub: Submission, fault: Fault) -> int | Awaitable[int]: ...

    def knows_patient(self, patient_id: str) -> bool | Awaitable[bool]: ...

    def patients(self) -> _Rows | Awaitable[_Rows]: ...

    def rows(self) -> _Rows | Awaitable[_Rows]: ...


async def _value(result: _T | Awaitable[_T]) -> _T:
    """A synchronous store's result as is (no await point: the SQLite path runs exactly
    as before, uninterleaved); an asynchronous store's awaited."""
    if inspect.isawaitable(result):
        return await result
    return result


@attrs.frozen
class EpisodeState:
    store: Store
    fault: Fault


@attrs.frozen
class Outcome:
    saved: bool
    status: int
    message: str
    delay_s: float = 0.0
    """How long the product stalls before answering (a commit that then hangs)."""


class Episodes:
    """The token table: which store and fault mode a URL token addresses."""

    def __init__(self) -> None:
        self._by_token: dict[str, EpisodeState] = {}

    def add(self, token: str, state: EpisodeState) -> None:
        self._by_token[token] = state

    def pop(self, token: str) -> EpisodeState | None:
        return self._by_token.pop(token, None)

    def get(self, token: str) -> EpisodeState | None:
        return self._by_token.get(token)


async def _submit(state: EpisodeState, values: Mapping[str, str], source: str) -> Outcome:
    patient = values.get("patient_id", "").strip()
    kind = values.get("type", "").strip()
    if not patient or kind not in ENCOUNTER_TYPES:
        return Outcome(False, 422, "Choose a patient and an encounter type")
    store = state.store
    if not await _value(store.knows_patient(patient)):
        return Outcome(False, 422, "No chart with that patient id")
    status: str | None = None
    if store.schema.has_status:
        status = values.get("status", "").strip() or None
        if status is not None and status not in STATUSES:
            return Outcome(False, 422, f"Status must be one of {', '.join(STATUSES)}")
    fault = state.fault
    if fault.status == 401:
        return Outcome(False, 401, fault.message)
    sub = Submission(
        patient, kind, values.get("note", ""), values.get("key") or None, source, status
    )
    await _value(store.write(sub, fault))
    return Outcome(fault.banner_saved, fault.status, fault.message, fault.hang_s)


_STYLE: Final = (
    "<style>body{font:16px/1.4 sans-serif;margin:24px;max-width:720px;color:#1b1b1b}"
    "h1{font-size:22px}label{display:block;margin:10px 0 4px;font-weight:600}"
    "select,textarea,input{font:inherit;width:100%;box-sizing:border-box;padding:6px}"
    "textarea{height:80px}button{font:inherit;margin-top:14px;padding:8px 20px}"
    "#banner{padding:10px 14px;margin:12px 0;border-radius:4px;font-weight:600}"
    "#banner.saved{background:#dff3e3;color:#14532d;border:1px solid #4caf50}"
    "#banner.error{background:#fde2e2;color:#7f1d1d;border:1px solid #e53935}"
    "table{border-collapse:collapse;width:100%}td,th{border:1px solid #bbb;padding:4px 8px;"
    "text-align:left}nav{margin:8px 0 16px}</style>"
)
_NAV: Final = "<nav><a href='./'>New encounter</a> | <a href='records'>Chart records</a></nav>"


def _page(body: str, status: int = 200, title: str = "MockMed") -> HTMLResponse:
    doc = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"{_STYLE}</head><body><h1>MockMed encounters</h1>{_NAV}{body}</body></html>"
    )
    return HTMLResponse(doc, status_code=status)


def _patient_options(charts: _Rows) -> str:
    if not charts:
        return "".join(
            f"<option value='{k}'>{html.escape(v)}</option>" for k, v in PATIENTS.items()
        )
    out = []
    for chart in charts:
        label = f"{chart.get('name')} ({chart.get('id')})"
        if chart.get("status") == "archived":
            label += " [archived: chart closed]"
        out.append(
            f"<option value='{html.escape(str(chart.get('id')))}'>{html.escape(label)}</option>"
        )
    return "".join(out)


def _form(store: Store, charts: _Rows) -> str:
    patients = _patient_options(charts)
    kinds = "".join(f"<option>{t}</option>" for t in ENCOUNTER_TYPES)
    statuses = (
        "<label>Status <select name='status'>"
        + "".join(f"<option>{s}</option>" for s in STATUSES)
        + "</select></label>"
        if store.schema.has_status
        else ""
    )
    return (
        "<form method='post' action='encounters'>"
        f"<label>Patient <select name='patient_id'>{patients}</select></label>"
        f"<label>Type <select name='type'>{kinds}</select></label>{statuses}"
        "<label>Note <textarea name='note'></textarea></label>"
        "<label>Referral reference <input type='text' name='key' value=''></label>"
        "<button type='submit'>Save</button></form>"
    )


def _cell(column: str, value: object) -> str:
    """One field of a record; a missing value is marked, so it never reads as empty text."""
    if value is None:
        return f"<td data-field='{column}' data-null='1'></td>"
    num = " data-num='1'" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
    return f"<td data-field='{column}'{num}>{html.escape(str(value))}</td>"


def _records(schema: StoreSchema, rows: _Rows) -> str:
    """Every encounter of the chart, one row each, as the product stores it."""
    cols = schema.columns[TABLE]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(_cell(c, row.get(c)) for c in cols) + "</tr>" for row in rows)
    empty = "" if body else "<p id='no-records'>No encounters recorded.</p>"
    return (
        "<h2>Chart records</h2><table id='records' "
        f"data-table='{TABLE}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{empty}"
    )


def _banner(outcome: Outcome) -> str:
    cls = "saved" if outcome.saved else "error"
    return f"<div id='banner' class='{cls}'>{html.escape(outcome.message)}</div>"


def _not_found() -> Response:
    return Response(b"unknown episode\n", status_code=404, media_type="text/plain")


def _gone() -> Response:
    """The client hung up before its body arrived (e.g. its episode was cancelled): there
    is nobody to answer and nothing was submitted, so end the request quietly."""
    return Response(b"client disconnected\n", status_code=400, media_type="text/plain")


def _state(request: Request, episodes: Episodes) -> EpisodeState | None:
    return episodes.get(str(request.path_params["token"]))


async def _submission(
    request: Request, episodes: Episodes
) -> tuple[EpisodeState, bytes | None] | Response:
    """The episode and the submitted body (None: too large), or the response that ends
    the request. The episode is looked up again once the body has arrived: it may have
    been torn down meanwhile (its store closed), and then it is gone, not a server error."""
    if _state(request, episodes) is None:
        return _not_found()
    try:
        body = await request.body()
    except ClientDisconnect:
        return _gone()
    state = _state(request, episodes)
    if state is None:
        return _not_found()
    return state, None if len(body) > MAX_BODY else body


def build_app(episodes: Episodes) -> Starlette:
    """The ASGI app over one token table (one per provider instance, no globals)."""

    async def form_page(request: Request) -> Response:
        state = _state(request, episodes)
        if state is None:
            return _not_found()
        return _page(_form(state.store, await _value(state.store.patients())))

    async def form_submit(request: Request) -> Response:
        got = await _submission(request, episodes)
        if isinstance(got, Response):
            return got
        state, body = got
        if body is None:
            return _page(_banner(Outcome(False, 413, "The form is too large")), 413)
        values = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        outcome = await _submit(state, values, "ui")
        charts = await _value(state.store.patients())
        page = _page(_banner(outcome) + _form(state.store, charts), outcome.status)
        if outcome.delay_s > 0:
            # The commit is done; the store may be torn down while we stall, so the page
            # is rendered first.
            await anyio.sleep(outcome.delay_s)
        return page

    async def records_page(request: Request) -> Response:
        state = _state(request, episodes)
        if state is None:
            return _not_found()
        rows = await _value(state.store.rows())
        return _page(_records(state.store.schema, rows), title="MockMed chart records")

    async def api_read(request: Request) -> Response:
        state = _state(request, episodes)
        if state is None:
            return _not_found()
        return Response(
            orjson.dumps({"encounters": await _value(state.store.rows())}),
            media_type="application/json",
        )

    async def api_write(request: Request) -> Response:
        got = await _submission(request, episodes)
        if isinstance(got, Response):
            return got
        state, body = got
        try:
            parsed = orjson.loads(body) if body is not None else None
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return Response(
                orjson.dumps({"saved": False, "message": "send a JSON object"}),
                400,
                media_type="application/json",
            )
        values = {str(k): "" if v is None else str(v) for k, v in parsed.items()}
        outcome = await _submit(state, values, "api")
        if outcome.delay_s > 0:
            await anyio.sleep(outcome.delay_s)
        payload = {"saved": outcome.saved, "message": outcome.message}
        return Response(orjson.dumps(payload), outcome.status, media_type="application/json")

    return Starlette(
        routes=[
            Route("/e/{token}/", form_page, methods=["GET"]),
            Route("/e/{token}/encounters", form_submit, methods=["POST"]),
            Route("/e/{token}/records", records_page, methods=["GET"]),
            Route("/e/{token}/api/encounters", api_read, methods=["GET"]),
            Route("/e/{token}/api/encounters", api_write, methods=["POST"]),
        ]
    )
