"""What docs/fault-proxy.md says of the fault proxy beyond form bodies (those are in
tests/faults/test_fault_proxy.py): a JSON body is never edited, only the upstream's origin is
kept, wrong_record masks the redirect and nothing else, redact changes only the record.
And the page lists every fault and every plan field, so it cannot fall behind."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import httpx
import orjson
import pytest

from effectbench.faults import FaultKind, FaultProxy, ProxyPlan, ProxyRecord
from effectbench.model import JSONScalar
from effectbench.serve import LocalServer

pytestmark = pytest.mark.anyio

DOC = Path(__file__).resolve().parents[2] / "docs" / "fault-proxy.md"
JSON = {"title": "Printer on fire", "target": "issue1", "priority": "urgent"}


class Product:
    """Records each delivery; answers a write with a redirect and a body naming its path."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
        self.got.append({"path": scope["path"], "query": scope["query_string"], "body": body})
        page = f"saved {scope['path']}".encode()
        headers = [(b"location", scope["path"].encode()), (b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": page})


@pytest.fixture
async def product() -> AsyncIterator[tuple[Product, str]]:
    app = Product()
    server = LocalServer(app, label="test product")
    await server.start()
    try:
        yield app, server.base_url
    finally:
        await server.stop()


async def _through(
    upstream: str, fixture: Mapping[str, JSONScalar], path: str, body: bytes, ctype: str, **kw: Any
) -> tuple[httpx.Response, tuple[ProxyRecord, ...]]:
    proxy = FaultProxy(upstream, ProxyPlan.from_fixture(fixture), **kw)
    await proxy.start()
    try:
        async with httpx.AsyncClient(follow_redirects=False) as client:
            answer = await client.post(
                proxy.base_url + path, content=body, headers={"content-type": ctype}
            )
        return answer, proxy.records()
    finally:
        await proxy.stop()


async def _json(upstream: str, fixture: Mapping[str, JSONScalar], path: str = "tp/issue1") -> Any:
    return await _through(upstream, fixture, path, orjson.dumps(JSON), "application/json")


async def test_a_json_body_is_never_edited(product: tuple[Product, str]) -> None:
    app, base = product
    _, (partial,) = await _json(base, {"proxy.fault": "partial", "proxy.fields": "title"})
    _, (stale,) = await _json(base, {"proxy.fault": "stale", "proxy.stale.priority": "low"})
    _, (moved,) = await _json(
        base, {"proxy.fault": "wrong_record", "proxy.from": "issue1", "proxy.to": "issue2"}
    )
    _, (unmatched,) = await _json(base, {"proxy.fault": "noop", "proxy.match.title": "x"})
    assert [orjson.loads(d["body"]) for d in app.got] == [JSON] * 4  # one delivery each
    assert (partial.forwarded, partial.note) == (1, "body is not a form: forwarded unedited")
    assert (stale.forwarded, stale.note) == (1, "body is not a form: no stale replay")
    assert [d["path"] for d in app.got] == ["/tp/issue1", "/tp/issue1", "/tp/issue2", "/tp/issue1"]
    assert moved.note == "issue1 -> issue2 in path"
    assert unmatched.action == "pass"


async def test_only_the_upstreams_origin_is_kept(product: tuple[Product, str]) -> None:
    app, base = product
    await _json(base + "ignored/prefix/?q=1", {}, "tp/issue7?x=2")
    assert (app.got[0]["path"], app.got[0]["query"]) == ("/tp/issue7", b"x=2")


async def test_wrong_record_masks_the_location_and_nothing_else(
    product: tuple[Product, str],
) -> None:
    _, base = product
    fixture = {"proxy.fault": "wrong_record", "proxy.from": "issue1", "proxy.to": "issue2"}
    answer, _ = await _through(
        base, fixture, "tp/issue1", b"target=issue1", "application/x-www-form-urlencoded"
    )
    assert answer.headers["location"] == "/tp/issue1"
    assert answer.text == "saved /tp/issue2"


async def test_redact_changes_the_record_not_the_request(product: tuple[Product, str]) -> None:
    app, base = product
    _, (record,) = await _through(
        base, {}, "e/s3cret/save", b"", "text/plain", redact=lambda p: p.replace("s3cret", "<t>")
    )
    assert record.path == "/e/<t>/save" and app.got[0]["path"] == "/e/s3cret/save"


def test_the_page_documents_every_fault_and_every_plan_field() -> None:
    spans = set(re.findall(r"`([^`\n]+)`", DOC.read_text(encoding="utf-8")))
    missing = [k.value for k in FaultKind if k.value not in spans]
    missing += [f.name for f in attrs.fields(ProxyPlan) if f.name not in spans]
    assert not missing, f"docs/fault-proxy.md does not name: {', '.join(missing)}"
