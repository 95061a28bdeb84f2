"""The fault proxy against a tiny local ASGI app: each fault on urlencoded and multipart
bodies, reads verbatim, gzip passthrough, several Set-Cookie headers, no redirects."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator, Mapping
from typing import Any

import attrs
import httpx
import orjson
import pytest

from effectbench.faults import FaultKind, FaultProxy, ProxyPlan, parse_form
from effectbench.model import JSONScalar
from effectbench.serve import LocalServer

pytestmark = pytest.mark.anyio

BOUNDARY = "----effectbenchBoundary7MA4YWxk"
PAGE = b"<html>" + b"hello " * 200 + b"</html>"


def _multipart(fields: Mapping[str, str]) -> bytes:
    out = b""
    for name, value in fields.items():
        out += (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            + value.encode()
            + b"\r\n"
        )
    return out + f"--{BOUNDARY}--\r\n".encode()


MP_TYPE = f"multipart/form-data; boundary={BOUNDARY}"
UE_TYPE = "application/x-www-form-urlencoded"
FIELDS = {"title": "Printer on fire", "@note": "smoke seen at 9:40 & rising", "priority": "urgent",
          "target": "issue1"}  # fmt: skip
ENCODINGS = {
    "urlencoded": (UE_TYPE, httpx.QueryParams(FIELDS).__str__().encode()),
    "multipart": (MP_TYPE, _multipart(FIELDS)),
}


class Upstream:
    """The product: logs every delivery it got (method, target, host, content type, body)."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        path = scope["path"]
        if scope["method"] == "POST":
            self.got.append({"path": path, "query": scope["query_string"].decode(),
                             "host": headers.get("host"), "type": headers.get("content-type"),
                             "body": body})  # fmt: skip
            await _send(send, 200, [(b"content-type", b"text/plain")], b"stored")
        elif path == "/gzip":
            await _send(send, 200, [(b"content-encoding", b"gzip")], gzip.compress(PAGE, mtime=0))
        elif path == "/cookies":
            await _send(
                send, 200, [(b"set-cookie", b"a=1; Path=/"), (b"set-cookie", b"b=2; Path=/")], b""
            )
        elif path == "/redirect":
            await _send(send, 302, [(b"location", b"/elsewhere?x=1")], b"moved")
        else:
            echo = orjson.dumps({"host": headers.get("host"), "cookie": headers.get("cookie"),
                                 "query": scope["query_string"].decode()})  # fmt: skip
            await _send(send, 200, [(b"content-type", b"application/json")], echo)


async def _send(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[Upstream, str]]:
    app = Upstream()
    server = LocalServer(app, label="test product")
    await server.start()
    try:
        yield app, server.base_url
    finally:
        await server.stop()


async def _proxy(base: str, fixture: Mapping[str, JSONScalar]) -> FaultProxy:
    proxy = FaultProxy(base, ProxyPlan.from_fixture(fixture))
    await proxy.start()
    return proxy


async def _post(proxy: FaultProxy, encoding: str, path: str = "tp/issue") -> httpx.Response:
    ctype, body = ENCODINGS[encoding]
    async with httpx.AsyncClient(follow_redirects=False) as client:
        return await client.post(
            proxy.base_url + path, content=body, headers={"content-type": ctype}
        )


def _fields(delivery: dict[str, Any]) -> dict[str, str]:
    form = parse_form(delivery["type"], delivery["body"])
    assert form is not None
    return dict(form.fields())


# ------------------------------------------------------------------ pass-through


async def test_reads_pass_verbatim_host_unchanged_gzip_raw_cookies_kept_no_redirects(
    upstream: tuple[Upstream, str],
) -> None:
    app, base = upstream
    proxy = await _proxy(base, {"proxy.fault": "partial", "proxy.fields": "@note"})
    try:
        async with httpx.AsyncClient(follow_redirects=False) as client:
            echo = await client.get(proxy.base_url + "x?q=1", headers={"cookie": "s=abc"})
            assert echo.json() == {
                "host": f"127.0.0.1:{proxy.port}",
                "cookie": "s=abc",
                "query": "q=1",
            }
            async with client.stream("GET", proxy.base_url + "gzip") as resp:
                raw = b"".join([c async for c in resp.aiter_raw()])
            assert resp.headers["content-encoding"] == "gzip"
            assert raw == gzip.compress(PAGE, mtime=0)
            assert int(resp.headers["content-length"]) == len(raw)
            cookies = await client.get(proxy.base_url + "cookies")
            assert cookies.headers.get_list("set-cookie") == ["a=1; Path=/", "b=2; Path=/"]
            moved = await client.get(proxy.base_url + "redirect")
            assert moved.status_code == 302 and moved.headers["location"] == "/elsewhere?x=1"
    finally:
        await proxy.stop()
    assert [r.action for r in proxy.records()] == ["pass"] * 4
    assert app.got == []


async def test_no_plan_forwards_writes_byte_for_byte(upstream: tuple[Upstream, str]) -> None:
    app, base = upstream
    proxy = await _proxy(base, {"mode": "ok"})
    try:
        for encoding in ENCODINGS:
            assert (await _post(proxy, encoding)).text == "stored"
    finally:
        await proxy.stop()
    assert [d["body"] for d in app.got] == [ENCODINGS[e][1] for e in ENCODINGS]
    assert [d["type"] for d in app.got] == [ENCODINGS[e][0] for e in ENCODINGS]


async def test_a_proxy_whose_upstream_is_itself_answers_502_and_sends_nothing() -> None:
    """A product handed a port number the proxy then bound (free_port's race) made the
    proxy forward to itself, a new connection per hop, until the process ran out of file
    descriptors (a generated package's tests, CI). It answers 502 and sends nothing."""
    proxy = FaultProxy("http://127.0.0.1:9/", ProxyPlan.from_fixture({"mode": "ok"}))
    await proxy.start()
    try:
        proxy.retarget(proxy.base_url)  # what on_port does when the product moves there
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as client:
            got = await client.get(proxy.base_url + "anything")
            posted = await client.post(proxy.base_url + "tp/issue", content=b"a=1")
    finally:
        await proxy.stop()
    for resp in (got, posted):
        assert resp.status_code == 502
        assert "is the proxy itself" in resp.text
    assert [(r.action, r.answered, r.forwarded) for r in proxy.records()] == [("error", 502, 0)] * 2


async def test_unknown_fault_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="proxy.fault 'nope' is not one of"):
        ProxyPlan.from_fixture({"proxy.fault": "nope"})
    with pytest.raises(ValueError, match="partial needs proxy.fields"):
        ProxyPlan.from_fixture({"proxy.fault": "partial"})


# ------------------------------------------------------------------ the faults

ENC = pytest.mark.parametrize("encoding", list(ENCODINGS))


@ENC
async def test_c1_partial_drops_only_that_field(
    upstream: tuple[Upstream, str], encoding: str
) -> None:
    app, base = upstream
    proxy = await _proxy(
        base, {"proxy.fault": "partial", "proxy.fields": "@note", "proxy.path": "/tp/issue"}
    )
    try:
        await _post(proxy, encoding, "tp/other")  # not matched: verbatim
        await _post(proxy, encoding)
    finally:
        await proxy.stop()
    assert app.got[0]["body"] == ENCODINGS[encoding][1]
    expected = {k: v for k, v in FIELDS.items() if k != "@note"}
    assert _fields(app.got[1]) == expected
    if encoding == "multipart":  # the other parts' bytes are untouched
        assert app.got[1]["body"] == _multipart(expected)
    rec = proxy.records()[1]
    assert (rec.action, rec.forwarded, rec.note) == ("partial", 1, "dropped: @note")


@ENC
async def test_c1_partial_blank_keeps_the_field_empty(
    upstream: tuple[Upstream, str], encoding: str
) -> None:
    app, base = upstream
    proxy = await _proxy(
        base, {"proxy.fault": "partial", "proxy.fields": "@note", "proxy.blank": True}
    )
    try:
        await _post(proxy, encoding)
    finally:
        await proxy.stop()
    assert _fields(app.got[0]) == {**FIELDS, "@note": ""}


@ENC
async def test_c2_duplicate_and_c5_double_deliver_twice(
    upstream: tuple[Upstream, str], encoding: str
) -> None:
    app, base = upstream
    for fault in ("duplicate", "double"):
        app.got.clear()
        proxy = await _proxy(base, {"proxy.fault": fault})
        try:
            assert (await _post(proxy, encoding)).text == "stored"
        finally:
            await proxy.stop()
        assert [d["body"] for d in app.got] == [ENCODINGS[encoding][1]] * 2
        rec = proxy.records()[0]
        assert (rec.action, rec.forwarded, rec.upstream) == (fault, 2, "200,200")


async def test_a_faked_answer_is_built_from_the_exchange(upstream: tuple[Upstream, str]) -> None:
    """location and body are templates: the episode's base URL, the request's path, a
    real-looking id (the path's number, or proxy.id), the location again in the body; a
    $ that names nothing stays as written."""
    app, base = upstream
    plan = ProxyPlan.from_fixture(
        {
            "proxy.fault": "noop",
            "proxy.status": 302,
            "proxy.location": "${base}issue${id}?@ok_message=issue%20${id}%20edited",
            "proxy.body": 'Redirecting to <a href="${location}">${location}</a> ($5, ${path})',
        }
    )
    created = attrs.evolve(plan, fault=FaultKind.PHANTOM, id="4", location="${base}issue${id}")
    proxies = [FaultProxy(base, p, base_path="tp/") for p in (plan, created)]
    for proxy in proxies:
        await proxy.start()
    bases = [proxy.base_url for proxy in proxies]
    try:
        edited = await _post(proxies[0], "urlencoded", "tp/issue1")
        made = await _post(proxies[1], "urlencoded", "tp/issue")
    finally:
        for proxy in proxies:
            await proxy.stop()
    where = f"{bases[0]}tp/issue1?@ok_message=issue%201%20edited"
    assert (edited.status_code, edited.headers["location"]) == (302, where)
    assert edited.text == f'Redirecting to <a href="{where}">{where}</a> ($5, /tp/issue1)'
    assert made.headers["location"] == f"{bases[1]}tp/issue4"
    assert app.got == []


@ENC
async def test_c3_phantom_and_c7_noop_forward_nothing(
    upstream: tuple[Upstream, str], encoding: str
) -> None:
    app, base = upstream
    phantom = await _proxy(
        base, {"proxy.fault": "phantom", "proxy.location": "issue?@ok_message=issue%2042%20created"}
    )  # fmt: skip
    noop = await _proxy(base, {"proxy.fault": "noop", "proxy.body": "Saved"})
    try:
        moved = await _post(phantom, encoding)
        said = await _post(noop, encoding)
    finally:
        await phantom.stop()
        await noop.stop()
    assert moved.status_code == 303
    assert moved.headers["location"] == "issue?@ok_message=issue%2042%20created"
    assert (said.status_code, said.text) == (200, "Saved")
    assert app.got == []
    assert [(r.action, r.forwarded) for r in (*phantom.records(), *noop.records())] == [
        ("phantom", 0), ("noop", 0)]  # fmt: skip


@ENC
async def test_c3_commit_then_504_with_a_body(
    upstream: tuple[Upstream, str], encoding: str
) -> None:
    app, base = upstream
    proxy = await _proxy(
        base, {"proxy.fault": "commit_then_error", "proxy.body": "<h1>504 Gateway Timeout</h1>"}
    )
    try:
        resp = await _post(proxy, encoding)
    finally:
        await proxy.stop()
    assert (resp.status_code, resp.text) == (504, "<h1>504 Gateway Timeout</h1>")
    assert [d["body"] for d in app.got] == [ENCODINGS[encoding][1]]
    assert proxy.records()[0].upstream == "200"


@ENC
async def test_c4_stale_replays_the_write_with_stale_values(
    upstream: tuple[Upstream, str], encoding: str
) -> None:
    app, base = upstream
    proxy = await _proxy(base, {"proxy.fault": "stale", "proxy.stale.priority": "low"})
    try:
        await _post(proxy, encoding)
    finally:
        await proxy.stop()
    assert [_fields(d) for d in app.got] == [FIELDS, {**FIELDS, "priority": "low"}]


@ENC
async def test_c6_wrong_record_rewrites_path_and_values(
    upstream: tuple[Upstream, str], encoding: str
) -> None:
    app, base = upstream
    proxy = await _proxy(
        base, {"proxy.fault": "wrong_record", "proxy.from": "issue1", "proxy.to": "issue2"}
    )
    try:
        await _post(proxy, encoding, "tp/issue1?@template=item")
        await _post(proxy, encoding, "tp/issue10")  # issue10 is not issue1
    finally:
        await proxy.stop()
    assert (app.got[0]["path"], app.got[0]["query"]) == ("/tp/issue2", "@template=item")
    assert _fields(app.got[0])["target"] == "issue2"
    assert app.got[1]["path"] == "/tp/issue10"


async def test_times_limits_the_fault_to_the_first_matching_writes(
    upstream: tuple[Upstream, str],
) -> None:
    app, base = upstream
    proxy = await _proxy(
        base, {"proxy.fault": "noop", "proxy.times": 1, "proxy.match.priority": "urgent"}
    )
    try:
        await _post(proxy, "urlencoded")
        await _post(proxy, "urlencoded")
    finally:
        await proxy.stop()
    assert [r.action for r in proxy.records()] == ["noop", "pass"]
    assert len(app.got) == 1


async def test_an_unreachable_product_is_a_502_record() -> None:
    server = LocalServer(Upstream())
    await server.start()
    base = server.base_url
    await server.stop()
    proxy = await _proxy(base, {})
    try:
        async with httpx.AsyncClient() as client:
            resp = await client.get(proxy.base_url)
    finally:
        await proxy.stop()
    assert resp.status_code == 502 and "could not reach the product" in resp.text
    assert proxy.records()[0].action == "error"


async def test_retarget_moves_forwarding_to_a_new_upstream(upstream: tuple[Upstream, str]) -> None:
    app, base = upstream
    proxy = await _proxy("http://127.0.0.1:1/", {})
    try:
        proxy.retarget(base)
        assert (await _post(proxy, "urlencoded")).text == "stored"
    finally:
        await proxy.stop()
    assert len(app.got) == 1
