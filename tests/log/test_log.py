"""Event log: exact line format, reader errors, torn tails, the writer, append, schema."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import orjson
import pytest
import structlog
from schema_check import _check, assert_every_line_is_a_typed_event, lines_of

from effectbench.core import events as ev
from effectbench.core.exitcodes import ExitCode
from effectbench.core.model import FailureClass
from effectbench.log.reader import (
    GENESIS_HASH,
    ChainBroken,
    LogCorrupt,
    LogEntry,
    LogError,
    LoggedEvent,
    LogSchemaError,
    encode_line,
    event_entry,
    open_log_writer,
    read_log,
    scan_tail,
    verify_log,
    write_events_sync,
)
from effectbench.schema import load_event_schema
from effectbench.testing import run_cli

EP = "screen_only::mm-create-001::t0"


def sample_entries(n: int = 6) -> list[LogEntry]:
    base: list[LogEntry] = [
        event_entry(ev.RunFinished(interrupted=False, episodes_finished=1, episodes_failed=0)),
        event_entry(ev.ArmStarted(), EP),
        event_entry(ev.ArmAction(kind="click", detail={"selector": "#save", "x": 3}), EP),
        event_entry(ev.Reported(True, False, "saved é ✓", 12.5), EP),
        event_entry(ev.EpisodeFailed(FailureClass.ENVIRONMENT, "post_read", "boom"), EP),
        ("custom.thing", {"nested": {"list": [1, 2.5, None, "x"]}}, None),
    ]
    return [base[i % len(base)] for i in range(n)]


# --------------------------------------------------------------------------- format


def test_line_is_orjson_envelope_with_hash_suffix_and_chains_from_genesis() -> None:
    data = {"kind": "click", "detail": {"x": 1}}
    line, h = encode_line(GENESIS_HASH, 0, "episode.action", 1.5, EP, data)
    envelope = {"v": 1, "seq": 0, "type": "episode.action", "ts": 1.5, "ep": EP, "data": data}
    body = orjson.dumps(envelope)[:-1]
    assert line == body + b',"h":"' + h.encode() + b'"}\n'
    assert h == hashlib.sha256(b"0" * 64 + b"\n" + body).hexdigest()
    assert body == line[:-1][:-72]
    line2, h2 = encode_line(h, 1, "episode.finished", 2.0, None, {})
    assert h2 == hashlib.sha256(h.encode() + b"\n" + line2[:-73]).hexdigest()
    assert orjson.loads(line2)["h"] == h2


def test_round_trip_of_typed_events(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    entries = sample_entries(12)
    tail = write_events_sync(path, entries, ts=100.0)
    reader = read_log(path)
    got = list(reader)
    assert [(e.type, e.data, e.ep) for e in got] == [
        (t, orjson.loads(orjson.dumps(d)), ep) for t, d, ep in entries
    ]
    assert [e.seq for e in got] == list(range(12))
    assert [e.line_no for e in got] == list(range(1, 13))
    assert all(e.ts == 100.0 for e in got)
    assert got[4].data["failure_class"] == "environment"
    assert got[3] == LoggedEvent(3, "episode.reported", 100.0, EP, dict(got[3].data), 4)
    assert repr(got[1]).startswith("LoggedEvent(seq=1, type='episode.arm_started', ts=100.0")
    assert (reader.count, reader.last_seq, reader.last_hash) == (12, 11, tail.last_hash)
    assert not reader.torn_tail and reader.warnings == []
    assert tail.valid_bytes == path.stat().st_size == reader.valid_bytes
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        got[0].seq = 5  # type: ignore[misc]


def test_empty_file_is_an_empty_log(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    reader = read_log(path)
    assert list(reader) == []
    assert (reader.count, reader.last_seq, reader.last_hash) == (0, None, GENESIS_HASH)
    assert verify_log(path).ok


def test_missing_file_and_directory_are_clear_log_errors(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="no event log at"):
        list(read_log(tmp_path / "nope.jsonl"))
    with pytest.raises(LogError, match="directory"):
        list(read_log(tmp_path))
    report = verify_log(tmp_path / "nope.jsonl")
    assert not report.ok and "no event log" in (report.reason or "")


# --------------------------------------------------------------------------- torn tail


def test_torn_last_line_at_every_cut_yields_all_complete_events_and_one_warning(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    write_events_sync(path, sample_entries(5))
    whole = path.read_bytes()
    last = lines_of(path)[-1]
    start = len(whole) - len(last)
    for cut in range(start + 1, len(whole)):  # inside the last line, newline included
        path.write_bytes(whole[:cut])
        reader = read_log(path)
        got = list(reader)
        assert [e.seq for e in got] == [0, 1, 2, 3]
        assert reader.torn_tail and len(reader.warnings) == 1
        assert "line 5" in reader.warnings[0]
        assert reader.valid_bytes == start
        report = verify_log(path)
        assert report.ok and report.torn_tail and report.count == 4


# --------------------------------------------------------------------------- corrupt lines


def _replace_line(path: Path, index: int, new: bytes) -> None:
    lines = lines_of(path)
    lines[index] = new
    path.write_bytes(b"".join(lines))


def _resign(lines: list[bytes]) -> list[bytes]:
    """Recompute every hash (a forger's log) so only structural checks can object."""
    out, prev = [], GENESIS_HASH
    for raw in lines:
        body = raw.rstrip(b"\n")[:-72]
        prev = hashlib.sha256(prev.encode() + b"\n" + body).hexdigest()
        out.append(body + b',"h":"' + prev.encode() + b'"}\n')
    return out


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda b: b"not json at all" + b"x" * 80, "hash suffix"),
        (lambda b: b"", "empty line"),
        (lambda b: b"short", "too short"),
        (lambda b: b.replace(b'"v":1,', b'"v":1,,'), "not valid JSON"),
        (lambda b: b"[" + b[1:], "not valid JSON"),
        (lambda b: b.replace(b'"type":', b'"typo":'), "missing field 'type'"),
        (lambda b: b.replace(b'"v":1,', b""), "missing field 'v'"),
        (lambda b: b.replace(b'"v":1,', b'"v":"1",'), "'v' must be an integer"),
        (lambda b: b.replace(b'"ts":', b'"ts":"x","z":'), "'ts'"),
        (lambda b: b.replace(b'"ep":"', b'"ep":7,"q":"'), "'ep'"),
        (lambda b: b.replace(b'"type":"', b'"type":7,"q":"'), "'type'"),
        (lambda b: b.replace(b'"seq":2', b'"seq":7'), "seq 7 where 2 was expected"),
        (lambda b: b.replace(b'"seq":2', b'"seq":true'), "'seq' must be an integer"),
        (lambda b: b.replace(b'"data":{', b'"data":[{').replace(b'},"h"', b'}],"h"'), "'data'"),
    ],
)
def test_corrupt_middle_line_names_its_line_number(
    tmp_path: Path, mutate: Any, expected: str
) -> None:
    path = tmp_path / "run.jsonl"
    write_events_sync(path, sample_entries(5))
    lines = lines_of(path)
    lines[2] = mutate(lines[2].rstrip(b"\n")) + b"\n"
    assert lines[2] != lines_of(path)[2]
    if len(lines[2]) > 73 and lines[2][-73:-67] == b',"h":"':
        lines = _resign(lines)  # so the structural check, not the chain, must object
    path.write_bytes(b"".join(lines))
    for verify in (True, False):
        reader = read_log(path, verify=verify)
        seen = []
        with pytest.raises(LogCorrupt) as info:
            for e in reader:
                seen.append(e.seq)
        assert info.value.line_no == 3, info.value
        assert expected in str(info.value)
        assert str(info.value).startswith("line 3: ")
        assert seen == [0, 1] and reader.count == 2
    report = verify_log(path)
    assert not report.ok and report.first_bad_line == 3 and report.count == 2


def test_edit_that_still_parses_breaks_the_chain_at_that_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_events_sync(path, sample_entries(6))
    lines = lines_of(path)
    lines[3] = lines[3].replace(b'"reported_success":true', b'"reported_success":fals', 1)
    lines[3] = lines[3].replace(b"fals", b"false", 1)
    path.write_bytes(b"".join(lines))
    with pytest.raises(ChainBroken) as info:
        list(read_log(path))
    assert info.value.line_no == 4
    assert [e.data.get("reported_success") for e in read_log(path, verify=False)][3] is False
    report = verify_log(path)
    assert (report.ok, report.first_bad_line, report.count) == (False, 4, 3)


def test_unknown_schema_major_is_refused_with_both_majors(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_events_sync(path, sample_entries(3))
    lines = lines_of(path)
    lines[0] = lines[0].replace(b'{"v":1,', b'{"v":2,', 1)
    path.write_bytes(b"".join(_resign(lines)))
    with pytest.raises(LogSchemaError) as info:
        list(read_log(path, verify=False))
    msg = str(info.value)
    assert info.value.line_no == 1
    assert "major 2 is not supported" in msg and "reads major 1" in msg
    assert isinstance(info.value, LogError)


def test_a_future_major_with_another_line_format_is_still_refused_as_a_major(
    tmp_path: Path,
) -> None:
    """A new major may change the line format itself (e.g. no trailing hash); the reader
    must still say "major 2 is not supported", not that the line is corrupt."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(
        b'{"v":2,"seq":0,"type":"run.started","ts":1.0,"ep":null,"data":{},"sig":"x"}\n'
    )
    with pytest.raises(LogSchemaError, match="major 2 is not supported.*reads major 1"):
        list(read_log(path))
    report = verify_log(path)
    assert not report.ok and report.first_bad_line == 1 and "major 2" in (report.reason or "")


def test_verify_against_manifest_catches_a_removed_last_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    tail = write_events_sync(path, sample_entries(5))
    assert verify_log(path, expected_final_hash=tail.last_hash, expected_count=5).ok
    path.write_bytes(b"".join(lines_of(path)[:-1]))
    assert verify_log(path).ok  # the chain alone cannot see it ...
    by_hash = verify_log(path, expected_final_hash=tail.last_hash)
    assert not by_hash.ok and "final hash" in (by_hash.reason or "")
    by_count = verify_log(path, expected_count=5)
    assert not by_count.ok and by_count.first_bad_line == 5


# --------------------------------------------------------------------------- writer


def test_many_concurrent_emitters_give_one_gapless_valid_chain(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    tasks, per = 40, 60

    async def main() -> tuple[int, int | None, str]:
        async with open_log_writer(path, batch_max=16, buffer_size=32) as w:

            async def worker(k: int) -> None:
                for i in range(per):
                    await w.emit(
                        "episode.action", {"kind": "k", "detail": {"i": i}}, f"arm::t{k}::t0"
                    )
                    if i % 7 == 0:
                        await anyio.lowlevel.checkpoint()

            async with anyio.create_task_group() as tg:
                for k in range(tasks):
                    tg.start_soon(worker, k)
            await w.emit_event(ev.RunFinished(False, tasks, 0))
        return w.count, w.last_seq, w.last_hash

    count, last_seq, last_hash = anyio.run(main)
    got = list(read_log(path))
    n = tasks * per + 1
    assert (count, last_seq) == (n, n - 1)
    assert [e.seq for e in got] == list(range(n))
    assert {(e.ep, e.data["detail"]["i"]) for e in got[:-1]} == {
        (f"arm::t{k}::t0", i) for k in range(tasks) for i in range(per)
    }
    for k in range(tasks):  # each task's own events stay in its order
        mine = [e.data["detail"]["i"] for e in got if e.ep == f"arm::t{k}::t0"]
        assert mine == list(range(per))
    assert got[-1].type == "run.finished"
    report = verify_log(path, expected_final_hash=last_hash, expected_count=n)
    assert report.ok, report
    assert all(type(e.ts) is float for e in got)


def test_new_log_refuses_a_non_empty_file_and_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_events_sync(path, sample_entries(2))
    before = path.read_bytes()

    async def main() -> None:
        async with open_log_writer(path) as w:
            await w.emit("x", {})

    with pytest.raises(LogError, match="already exists and is not empty"):
        anyio.run(main)
    with pytest.raises(LogError, match="already exists"):
        write_events_sync(path, sample_entries(1))
    assert path.read_bytes() == before
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    write_events_sync(empty, sample_entries(1))
    assert verify_log(empty).count == 1


def test_append_after_torn_tail_truncates_warns_and_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_events_sync(path, sample_entries(4))
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 30])  # killed mid-write of line 4

    async def main() -> tuple[int, int]:
        async with open_log_writer(path, append=True) as w:
            await w.emit("episode.abandoned", {"reason": "resumed"}, EP)
            await w.emit_event(ev.EpisodeFinished(), EP)
        return w.count, w.written

    with structlog.testing.capture_logs() as logs:
        count, written = anyio.run(main)
    assert (count, written) == (5, 2)
    assert any(
        log["event"] == "event_log.truncated_torn_tail" and log["log_level"] == "warning"
        for log in logs
    )
    got = list(read_log(path))
    assert [e.seq for e in got] == [0, 1, 2, 3, 4]
    assert [e.type for e in got[3:]] == ["episode.abandoned", "episode.finished"]
    assert lines_of(path)[:3] == whole.splitlines(keepends=True)[:3]
    assert verify_log(path, expected_count=5).ok
    state = scan_tail(path)
    tail = write_events_sync(path, [("run.finished", {"interrupted": False}, None)], append=True)
    assert tail.count == 6 and tail.last_seq == 5 and state.count == 5
    assert verify_log(path, expected_final_hash=tail.last_hash).ok


def test_append_refuses_a_corrupt_log_and_leaves_it_untouched(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_events_sync(path, sample_entries(4))
    _replace_line(path, 1, b"garbage\n")
    before = path.read_bytes()
    with pytest.raises(LogError, match="line 2"):
        write_events_sync(path, sample_entries(1), append=True)
    assert path.read_bytes() == before


def test_append_to_a_missing_file_starts_a_new_log(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    write_events_sync(path, sample_entries(2), append=True)
    assert verify_log(path, expected_count=2).ok


def test_bad_payload_fails_at_the_caller_and_the_writer_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"

    async def main() -> None:
        async with open_log_writer(path) as w:
            await w.emit("a", {"ok": 1})
            with pytest.raises(TypeError):
                await w.emit("b", {"bad": object()})
            with pytest.raises(TypeError):
                await w.emit("", {})
            with pytest.raises(TypeError):
                await w.emit("c", {}, ep=3)  # type: ignore[arg-type]
            await w.emit("d", {"ok": 2})

    anyio.run(main)
    assert [e.type for e in read_log(path)] == ["a", "d"]


def test_error_in_the_block_propagates_unchanged_after_events_are_written(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"

    class Boom(Exception):
        pass

    async def main() -> None:
        async with open_log_writer(path) as w:
            for i in range(50):
                await w.emit("x", {"i": i})
            raise Boom("scheduler crashed")

    with pytest.raises(Boom, match="scheduler crashed"):
        anyio.run(main)
    assert verify_log(path, expected_count=50).ok


def test_cancellation_still_writes_every_accepted_event(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    accepted = 0

    async def main() -> None:
        nonlocal accepted
        with anyio.CancelScope() as scope:
            async with open_log_writer(path, buffer_size=4, batch_max=2) as w:
                for i in range(10_000):
                    await w.emit("x", {"i": i})
                    accepted += 1
                    if i == 500:
                        scope.cancel()
        assert scope.cancelled_caught

    anyio.run(main)
    got = list(read_log(path))
    assert len(got) == accepted
    assert [e.data["i"] for e in got] == list(range(accepted))


def test_emit_after_close_is_a_log_error(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"

    async def main() -> None:
        async with open_log_writer(path) as w:
            await w.emit("x", {})
        with pytest.raises(LogError, match="closed"):
            await w.emit("y", {})

    anyio.run(main)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_failing_disk_surfaces_as_log_error() -> None:
    async def main() -> None:
        async with open_log_writer("/dev/full") as w:
            await w.emit("x", {"pad": "y" * 10_000})
            await anyio.sleep(0.05)
            with pytest.raises(LogError, match="stopped"):
                for _ in range(100):
                    await w.emit("x", {})
                    await anyio.lowlevel.checkpoint()

    with pytest.raises(LogError, match="No space left"):
        anyio.run(main)


def test_writer_and_sync_writer_produce_the_same_format(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    entries = sample_entries(7)

    async def main() -> None:
        async with open_log_writer(a) as w:
            for t, d, ep in entries:
                await w.emit(t, d, ep)

    anyio.run(main)
    write_events_sync(b, entries)
    strip = [(e.seq, e.type, e.ep, e.data) for e in read_log(a)]
    assert strip == [(e.seq, e.type, e.ep, e.data) for e in read_log(b)]


# --------------------------------------------------------------------------- schema


KNOWN = {
    "$schema", "$id", "$ref", "$defs", "title", "description", "type", "required",
    "properties", "additionalProperties", "items", "oneOf", "const", "enum", "minimum",
    "maximum", "pattern",
}  # fmt: skip


def _keywords(node: Any, parent_is_map: bool = False) -> set[str]:
    if isinstance(node, list):
        return set().union(*(_keywords(x) for x in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found: set[str] = set()
    for k, v in node.items():
        if not parent_is_map:
            found.add(k)
        found |= _keywords(v, parent_is_map=k in ("properties", "$defs"))
    return found


def test_schema_covers_every_event_type_and_field() -> None:
    schema = load_event_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert _keywords(schema) <= KNOWN  # the mini validator understands all of it
    branches = {
        b["properties"]["type"]["const"]: b["properties"]["data"]["$ref"] for b in schema["oneOf"]
    }
    assert set(branches) == set(ev.EVENT_TYPES)
    for type_, cls in ev.EVENT_TYPES.items():
        d = schema["$defs"][branches[type_].removeprefix("#/$defs/")]
        fields = {a.name for a in attrs.fields(cls)}
        required = {a.name for a in attrs.fields(cls) if a.default is attrs.NOTHING}
        assert set(d.get("required", ())) == required and fields == set(d["properties"]), type_


def test_logged_lines_validate_against_the_schema(tmp_path: Path) -> None:
    schema = load_event_schema()
    snapshot = {
        "readable": True,
        "tables": {"orders": [{"id": 1, "note": "x", "ok": None}]},
        "error": None,
    }
    effect = {
        "record_written": {"table": "orders", "selector": {"note": "x"}, "expected_count": 1},
        "field_equals": [{"field": "qty", "expected": 2}],
    }
    all_types = [
        ev.RunStarted("r1", {"tasks": []}, "abc", {"effectbench": "0.1.0"}, 32),
        ev.RunResumed("abc", 3, 1, 8),
        ev.RunFinished(False, 3, 1),
        ev.EpisodePlanned(
            "arm", "t", 0, {"p": "v"}, "control", "web", "dev", True, True, True, effect, "ef"
        ),
        ev.EpisodeProvisioned(3.5),
        ev.PreSnapshot(0, snapshot),
        ev.ArmStarted(),
        ev.ArmAction("click", {"x": 1}),
        ev.ArmScreenshot(
            "ab" * 32, f"blobs/sha256/{'ab' * 32}.png", 2048, "image/png", "after submit"
        ),
        ev.ArmTelemetry(None, 10, None, 0.01, 2),
        ev.Reported(True, False, "done", 4.0),
        ev.PostRead(1, snapshot),
        ev.EpisodeFinished(),
        ev.EpisodeFailed(FailureClass.AGENT, "arm", "x"),
        ev.EpisodeAbandoned("resume"),
        ev.Injected("proxy.partial", {"path": "/tp/issue", "forwarded": 1}),
        ev.MutationPlanned(True, "", ({"table": "orders", "kind": "null"},), ("orders row 1",)),
        ev.MutationRead(0, {"table": "orders"}, "applied", "orders.note null", None, snapshot),
        ev.MutationRead(1, {"table": "orders"}, "refused", "NOT NULL"),
    ]
    path = tmp_path / "run.jsonl"
    write_events_sync(path, [event_entry(e, EP) for e in all_types])
    for raw in lines_of(path):
        assert _check(schema, orjson.loads(raw), schema) == [], raw
    bad = orjson.loads(lines_of(path)[10])
    bad["data"]["halted"] = "no"
    assert _check(schema, bad, schema) != []
    bad = orjson.loads(lines_of(path)[0])
    bad["v"] = 2
    assert _check(schema, bad, schema) != []


def _cli(*args: str, status: int = ExitCode.OK) -> None:
    proc = run_cli(*args, "-q")
    assert proc.returncode == status, proc.stderr


def test_every_line_the_scheduler_writes_validates_against_the_schema(tmp_path: Path) -> None:
    """Real MockMed runs, not hand-built events: a full run killed and resumed (run.resumed,
    episode.abandoned) and a run whose arms all time out (episode.failed)."""
    full, timed_out = tmp_path / "full", tmp_path / "timeout"
    _cli("run", "--trials", "1", "--out", str(full))
    log = full / "events.jsonl"
    log.write_bytes(b"".join(lines_of(log)[:20]))  # cut inside in-flight episodes
    _cli("run", "--resume", str(full))
    _cli(
        "run",
        "--trials",
        "1",
        "--arm",
        "screen_only",
        "--episode-timeout",
        "1e-6",
        "--out",
        str(timed_out),
        status=ExitCode.INCOMPLETE,
    )  # every episode timed out
    proxied = tmp_path / "proxied"  # episode.injected comes from the fault proxy
    _cli("run", "--provider", "mockmed-proxy", "--trials", "1", "--arm", "screen_only",
         "--out", str(proxied))  # fmt: skip
    diffs = tmp_path / "diffs"  # the reference reads come from reference-mode diffs
    _cli("run", "--provider", "mockmed-diff", "--trials", "1", "--arm", "screen_only",
         "--task", "*-ref-*", "--out", str(diffs))  # fmt: skip
    audit = tmp_path / "audit"  # the mutation audit's reads come from an audit's reference
    run_cli("audit", "--provider", "mockmed", "--trials", "1", "--task", "mockmed::ok",
            "--out", str(audit))  # fmt: skip
    schema = load_event_schema()
    seen = set()
    logs = (log, timed_out / "events.jsonl", proxied / "events.jsonl", diffs / "events.jsonl",
            audit / "events.jsonl")  # fmt: skip
    for path in logs:
        assert_every_line_is_a_typed_event(path)
        for raw in lines_of(path):
            line = orjson.loads(raw)
            assert _check(schema, line, schema) == [], raw
            seen.add(line["type"])
    # HTTP arms take no screenshots: browser runs' lines are checked in test_browser_anchor.py
    assert seen == set(ev.EVENT_TYPES) - {ev.ArmScreenshot.TYPE}
