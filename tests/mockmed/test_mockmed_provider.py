"""MockMed over real HTTP and real SQLite files: each fault mode, the oracle's
independence, isolation between episodes and teardown."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import types
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import httpx
import pytest
from effectbench_mockmed import MODES, PINNED, TASKS, MockMedOracle, MockMedProvider
from effectbench_mockmed.anchor import FAULT_MODES
from effectbench_mockmed.app import Episodes, EpisodeState, build_app
from effectbench_mockmed.client import read_banner
from effectbench_mockmed.faults import FAULTS
from effectbench_mockmed.store import EncounterStore, build_template
from hypothesis import given, settings
from hypothesis import strategies as st

from effectbench.core.model import (
    Category,
    InvalidSpec,
    JSONScalar,
    ParamRef,
    Snapshot,
    TaskSpec,
    resolve_value,
    trial_params,
    trial_tag,
)
from effectbench.core.provider import BenchmarkProvider, EnvHandle, ProvisionedEpisode

pytestmark = pytest.mark.anyio


@pytest.fixture
async def provider(tmp_path: Path) -> AsyncIterator[MockMedProvider]:
    p = MockMedProvider(tmp_root=tmp_path)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


def task(mode: str) -> TaskSpec:
    return next(t for t in TASKS if t.task_id == f"mockmed::{mode}")


def solution(t: TaskSpec, params: dict[str, str]) -> dict[str, JSONScalar]:
    assert t.solution is not None
    return {k: resolve_value(v, params) for k, v in t.solution.items()}


def db_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("ep-*.db*"))


# --- the task pack -------------------------------------------------------------------


def test_nine_tasks_match_the_anchor_table() -> None:
    assert [t.task_id for t in TASKS] == [f"mockmed::{m.mode}" for m in MODES]
    assert len(TASKS) == 9
    by_mode = {t.fixture["mode"]: t for t in TASKS}
    assert {m: t.category for m, t in by_mode.items()} == {
        "ok": Category.CONTROL,
        "partial": Category.C1_PARTIAL_SAVE,
        "duplicate": Category.C2_DUPLICATE_SUBMISSION,
        "timeout": Category.C3_OPTIMISTIC_THEN_REJECT,
        "optimistic": Category.C3_OPTIMISTIC_THEN_REJECT,
        "session": Category.C3_OPTIMISTIC_THEN_REJECT,
        "stale": Category.C4_STALE_OVERWRITE,
        "double": Category.C5_DOUBLE_DELIVERED_INPUT,
        "idempotent": Category.CONTROL,
    }
    assert {m for m, t in by_mode.items() if t.correct_action_available} == {
        "ok",
        "timeout",
        "idempotent",
    }
    assert [m for m, t in by_mode.items() if t.initial_state] == ["stale"]
    for t in TASKS:
        assert t.substrate.value == "web" and t.split.value == "dev"
        assert not t.reversible and t.effect_declared
        assert (
            t.oracle.channel == "snapshot"
            and t.oracle.isolated_from_agent
            and t.oracle.trial_unique_payload
        )
        assert not t.oracle.adversarially_audited
        assert t.expected_effect.record_written.forbid_collateral_loss
        assert t.solution is not None and t.solution["note"] == ParamRef("note")
    assert set(FAULT_MODES) == set(FAULTS) - {"ok", "idempotent"}
    assert set(PINNED["screen_only"].per_mode) == set(FAULTS)


def test_trial_payload_is_the_anchor_example() -> None:
    assert trial_tag("mockmed::ok", 0) == "43b6666f11c2"
    params = trial_params(task("ok"), 0)
    assert params == {"note": "triage note 43b6666f11c2", "record_key": "key-43b6666f11c2"}


def test_provider_satisfies_the_protocol() -> None:
    p = MockMedProvider()
    assert isinstance(p, BenchmarkProvider)
    assert p.name == "mockmed" and p.version


# --- the nine fault modes over real HTTP + SQLite ----------------------------------

# mode -> (banner says saved, HTTP status, [(type, note is this trial's note)] stored after one
# submit)
EXPECTED: dict[str, tuple[bool, int, list[tuple[str, bool]]]] = {
    "ok": (True, 200, [("Triage", True)]),
    "partial": (True, 200, [("Triage", False)]),
    "duplicate": (True, 200, [("Triage", True), ("Triage", True)]),
    "timeout": (False, 504, [("Triage", True)]),
    "optimistic": (True, 200, []),
    "session": (False, 401, []),
    "stale": (True, 200, [("Triage", True)]),
    "double": (True, 200, [("Triage", True), ("Triage", True)]),
    "idempotent": (True, 200, [("Triage", True)]),
}


@pytest.mark.parametrize("mode", list(EXPECTED))
async def test_fault_mode_over_http(provider: MockMedProvider, mode: str) -> None:
    t = task(mode)
    params = trial_params(t, 3)
    ep = await provider.provision(t, 3, params)
    try:
        pre = await ep.oracle.read()
        assert pre.readable
        pre_rows = pre.rows("encounters")
        if mode == "stale":
            assert [(r["patient_id"], r["type"]) for r in pre_rows] == [("p1", "Urgent")]
        else:
            assert pre_rows == ()
        assert ep.env.driver is not None
        resp = await ep.env.driver.submit(solution(t, params))
        saved, status, stored = EXPECTED[mode]
        assert (resp.screen_says_saved, resp.status) == (saved, status)
        post = await ep.oracle.read()
        rows = post.rows("encounters")
        assert [(r["type"], r["note"] == params["note"]) for r in rows] == stored
        assert all(r["patient_id"] == "p1" and r["source"] == "ui" for r in rows)
        assert all(r["key"] == params["record_key"] for r in rows)
        # the product's own readback is a different path to the same truth
        assert ep.env.verifier is not None
        assert (await ep.env.verifier.read()).rows("encounters") == rows
        # every submission is recorded as telemetry
        assert [a.kind for a in ep.env.telemetry.actions] == ["submit_form"]
        assert ep.env.telemetry.actions[0].detail["screen_says_saved"] is saved
    finally:
        await ep.teardown()


async def test_ids_are_assigned_from_one(provider: MockMedProvider) -> None:
    ep = await provider.provision(task("duplicate"), 0, trial_params(task("duplicate"), 0))
    try:
        assert ep.env.driver is not None
        await ep.env.driver.submit(solution(task("duplicate"), trial_params(task("duplicate"), 0)))
        assert [r["id"] for r in (await ep.oracle.read()).rows("encounters")] == [1, 2]
    finally:
        await ep.teardown()


async def test_form_page_banner_and_json_api_over_raw_http(provider: MockMedProvider) -> None:
    ep = await provider.provision(task("ok"), 0, {})
    base = ep.env.channels["base_url"]
    assert base.startswith("http://127.0.0.1:") and base.endswith("/")
    async with httpx.AsyncClient(base_url=base, trust_env=False) as client:
        page = await client.get("")
        assert page.status_code == 200
        for field in ("name='patient_id'", "name='type'", "name='note'", "name='key'"):
            assert field in page.text
        assert read_banner(page.text) == (False, "")
        bad = await client.post("encounters", data={"patient_id": "p1", "type": "Nonsense"})
        assert bad.status_code == 422 and read_banner(bad.text)[0] is False
        ok = await client.post(
            "encounters", data={"patient_id": "p1", "type": "Triage", "note": "a<b"}
        )
        assert "<div id='banner' class='saved'>Saved</div>" in ok.text
        api = await client.post(
            "api/encounters", json={"patient_id": "p2", "type": "Urgent", "note": "x"}
        )
        assert api.status_code == 200 and api.json()["saved"] is True
        notjson = await client.post("api/encounters", content=b"[1")
        assert notjson.status_code == 400
        rows = (await client.get("api/encounters")).json()["encounters"]
        assert [(r["patient_id"], r["note"], r["source"]) for r in rows] == [
            ("p1", "a<b", "ui"),
            ("p2", "x", "api"),
        ]
        # another token, or a guessed one, addresses nothing
        root = base.split("/e/")[0]
        assert (await client.get(f"{root}/e/guessed/api/encounters")).status_code == 404
    await ep.teardown()
    async with httpx.AsyncClient(trust_env=False) as client:
        assert (await client.get(base + "api/encounters")).status_code == 404


async def test_episodes_are_isolated(provider: MockMedProvider) -> None:
    t = task("stale")
    a = await provider.provision(t, 0, trial_params(t, 0))
    b = await provider.provision(t, 1, trial_params(t, 1))
    try:
        assert a.env.channels["base_url"] != b.env.channels["base_url"]
        assert a.env.driver is not None
        await a.env.driver.submit(solution(t, trial_params(t, 0)))
        a_rows = (await a.oracle.read()).rows("encounters")
        b_rows = (await b.oracle.read()).rows("encounters")
        assert [r["type"] for r in a_rows] == ["Triage"]  # a's stale write wiped a's own Urgent row
        assert [r["type"] for r in b_rows] == ["Urgent"]  # b is untouched
    finally:
        await a.teardown()
        await b.teardown()


# --- the oracle ------------------------------------------------------------------------


async def test_a_body_still_in_flight_at_teardown_ends_quietly(provider: MockMedProvider) -> None:
    """The episode is torn down (its store closed) while a submission's body is still
    arriving: the product answers 404 for the gone episode, never a 500 from writing
    through a closed connection."""
    import anyio

    t = task("ok")
    params = trial_params(t, 0)
    ep = await provider.provision(t, 0, params)
    url = httpx.URL(ep.env.channels["base_url"]).join("encounters")
    body = b"patient_id=p1&type=Triage&note=late"
    head = (
        f"POST {url.raw_path.decode()} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    async with await anyio.connect_tcp("127.0.0.1", int(url.port or 0)) as sock:
        await sock.send(head + body[:10])
        await anyio.wait_all_tasks_blocked()  # the handler is now waiting for the rest of the body
        await ep.teardown()
        await sock.send(body[10:])
        reply = b""
        with anyio.fail_after(10):
            try:
                while chunk := await sock.receive():
                    reply += chunk
            except anyio.EndOfStream:
                pass
    assert reply.startswith(b"HTTP/1.1 404"), reply[:200]


async def test_oracle_connection_cannot_write(provider: MockMedProvider) -> None:
    ep = await provider.provision(task("ok"), 0, {})
    try:
        assert isinstance(ep.oracle, MockMedOracle)
        assert (await ep.oracle.read()).readable
        conn = ep.oracle._connect()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute(
                "INSERT INTO encounters(patient_id, type, note) VALUES ('p1', 'Triage', 'forged')"
            )
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM encounters")
        assert (await ep.oracle.read()).rows("encounters") == ()
    finally:
        await ep.teardown()


async def test_oracle_sees_each_new_write(provider: MockMedProvider) -> None:
    """No read transaction is left open between reads, so no stale snapshot."""
    t = task("ok")
    ep = await provider.provision(t, 0, trial_params(t, 0))
    try:
        assert ep.env.driver is not None
        for n in range(1, 4):
            await ep.env.driver.submit(solution(t, trial_params(t, 0)))
            assert len((await ep.oracle.read()).rows("encounters")) == n
    finally:
        await ep.teardown()


async def test_oracle_reports_unreadable_never_raises(
    tmp_path: Path, provider: MockMedProvider
) -> None:
    missing = await MockMedOracle(tmp_path / "absent.db").read()
    assert not missing.readable and missing.error
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    assert not (await MockMedOracle(garbage).read()).readable
    ep = await provider.provision(task("ok"), 0, {})
    await ep.teardown()
    after = await ep.oracle.read()
    assert after == Snapshot.unreadable(after.error or "") and after.error


async def test_teardown_removes_files_and_is_idempotent(
    tmp_path: Path, provider: MockMedProvider
) -> None:
    t = task("double")
    ep = await provider.provision(t, 0, trial_params(t, 0))
    assert ep.env.driver is not None
    await ep.env.driver.submit(solution(t, trial_params(t, 0)))
    await ep.oracle.read()
    assert db_files(tmp_path)
    await ep.teardown()
    await ep.teardown()
    assert db_files(tmp_path) == []


async def test_stop_tears_down_what_is_left(tmp_path: Path) -> None:
    p = MockMedProvider(tmp_root=tmp_path)
    with pytest.raises(RuntimeError, match=r"MockMedProvider\.provision\(\) before start\(\)"):
        await p.provision(task("ok"), 0, {})
    await p.start()
    try:
        with pytest.raises(RuntimeError, match=r"MockMedProvider\.start\(\) called twice"):
            await p.start()
        with pytest.raises(ValueError, match="not a MockMed mode"):
            await p.provision(attrs.evolve(task("ok"), fixture={"mode": "chaos"}), 0, {})
        bad_seed = attrs.evolve(task("ok"), initial_state={"encounters": ({"colour": "red"},)})
        with pytest.raises(ValueError, match="unknown columns"):
            await p.provision(bad_seed, 0, {})
        assert db_files(tmp_path) == []  # a failed provision leaves nothing behind
        await p.provision(task("ok"), 0, {})
        await p.provision(task("stale"), 0, {})
        assert db_files(tmp_path)
    finally:
        await p.stop()
    assert list(tmp_path.iterdir()) == []
    await p.stop()  # idempotent
    await p.start()  # restartable
    await p.stop()


# --- the arm's handle holds no path to the oracle ---------------------------------------


def _walk(obj: Any, seen: set[int], depth: int = 0) -> Iterator[Any]:
    if id(obj) in seen or depth > 12:
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, (str, bytes, int, float, bool, type(None), type, types.ModuleType)):
        return
    children: list[Any] = []
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            children += [k, v]
    if isinstance(obj, (list, tuple, set, frozenset)):
        children += list(obj)
    if isinstance(obj, types.MethodType):
        children.append(obj.__self__)
    if isinstance(obj, types.FunctionType):
        children += [c.cell_contents for c in obj.__closure__ or ()]
    if hasattr(obj, "__dict__"):
        children += list(vars(obj).values())
    for slot in getattr(type(obj), "__slots__", ()):
        if isinstance(slot, str) and hasattr(obj, slot):
            children.append(getattr(obj, slot))
    if attrs.has(type(obj)):
        children += [getattr(obj, f.name) for f in attrs.fields(type(obj))]
    for child in children:
        yield from _walk(child, seen, depth + 1)


async def test_env_handle_exposes_no_oracle(tmp_path: Path, provider: MockMedProvider) -> None:
    ep: ProvisionedEpisode = await provider.provision(
        task("stale"), 0, trial_params(task("stale"), 0)
    )
    try:
        env: EnvHandle = ep.env
        reached = list(_walk(env, set()))
        assert len(reached) > 20  # the walk really descended (driver, client, transport ...)
        assert any(isinstance(o, aiohttp.ClientSession) for o in reached)
        for o in reached:
            assert not isinstance(
                o, (MockMedOracle, sqlite3.Connection, sqlite3.Cursor, EncounterStore, Path)
            )
            assert o is not ep.oracle
            if isinstance(o, str):
                assert str(tmp_path) not in o and ".db" not in o, o
        # positive control: the same walk does find the connection inside the oracle
        await ep.oracle.read()
        assert any(isinstance(o, sqlite3.Connection) for o in _walk(ep.oracle, set()))
    finally:
        await ep.teardown()


# --- untrusted form input round-trips ----------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(note=st.text(max_size=200), key=st.text(max_size=30))
def test_any_form_note_round_trips(
    tmp_path_factory: pytest.TempPathFactory, note: str, key: str
) -> None:
    """Whatever a user types into the form is stored and read back byte-for-byte."""
    import anyio

    note = note.replace("\x00", "")
    key = key.replace("\x00", "")
    root = tmp_path_factory.mktemp("prop")
    template = root / "t.db"
    build_template(template)
    store = EncounterStore(root / "e.db", template, ())
    episodes = Episodes()
    episodes.add("tok", EpisodeState(store, FAULTS["ok"]))

    async def go() -> tuple[str, list[dict[str, Any]]]:
        transport = httpx.ASGITransport(app=build_app(episodes))
        async with httpx.AsyncClient(transport=transport, base_url="http://t/e/tok/") as c:
            page = await c.post(
                "encounters", data={"patient_id": "p1", "type": "Triage", "note": note, "key": key}
            )
            rows = (await c.get("api/encounters")).json()["encounters"]
            return page.text, rows

    try:
        page, rows = anyio.run(go)
    finally:
        store.close()
    assert read_banner(page) == (True, "Saved")
    assert [(r["note"], r["key"]) for r in rows] == [(note, key or None)]


def test_invalid_task_ids_still_refused() -> None:
    with pytest.raises(InvalidSpec):
        attrs.evolve(task("ok"), task_id="mockmed::t3")


def test_listing_providers_does_not_import_the_http_client() -> None:
    """aiohttp costs ~100 ms to import; `effectbench providers` imports this package
    only to list it, so the client is loaded by start(), when a run needs it."""
    code = "import sys, effectbench_mockmed; print('aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
