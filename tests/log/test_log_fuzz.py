"""Fuzzing the log reader: untrusted bytes only ever raise LogError, and every edit,
deletion, duplication or reordering of a line in a valid log is detected."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from effectbench.core.events import EVENT_TYPES
from effectbench.log.reader import (
    GENESIS_HASH,
    LogEntry,
    LogError,
    encode_line,
    read_log,
    verify_log,
)

FUZZ = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
entries_st = st.lists(
    st.tuples(
        st.sampled_from(sorted(EVENT_TYPES)) | st.text(min_size=1, max_size=10),
        st.dictionaries(st.text(max_size=8), json_values, max_size=4),
        st.none() | st.text(max_size=16),
    ),
    min_size=1,
    max_size=8,
)


def build(entries: list[LogEntry]) -> tuple[list[bytes], str]:
    """Lines (with newlines) of a valid log and its final hash."""
    lines, prev = [], GENESIS_HASH
    for seq, (type_, data, ep) in enumerate(entries):
        line, prev = encode_line(prev, seq, type_, 1000.0 + seq, ep, data)
        lines.append(line)
    return lines, prev


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "fuzz.jsonl"


def read_all(path: Path, verify: bool) -> tuple[list[Any], LogError | None]:
    """Everything the reader yields, and the error that stopped it (never anything else)."""
    got: list[Any] = []
    try:
        for event in read_log(path, verify=verify):
            got.append(event)  # noqa: PERF402 - keep what was read before an error
    except LogError as e:
        return got, e
    return got, None


def assert_only_log_errors(path: Path) -> None:
    for verify in (True, False):
        got, _ = read_all(path, verify)
        assert [e.seq for e in got] == list(range(len(got)))
        assert [e.line_no for e in got] == list(range(1, len(got) + 1))
    report = verify_log(path, expected_final_hash=GENESIS_HASH, expected_count=0)
    assert isinstance(report.ok, bool)


# --------------------------------------------------------------------------- untrusted bytes


@FUZZ
@given(st.binary(max_size=800))
def test_arbitrary_bytes_raise_only_log_errors(log_path: Path, blob: bytes) -> None:
    log_path.write_bytes(blob)
    assert_only_log_errors(log_path)


@FUZZ
@given(
    entries_st,
    st.lists(
        st.binary(max_size=40)
        | st.sampled_from([b"\n", b'"}', b',"h":"', b'{"v":1,"seq":0,', b"0" * 64, b'{"v":2']),
        max_size=6,
    ),
    st.randoms(use_true_random=False),
)
def test_valid_lines_spliced_with_junk_raise_only_log_errors(
    log_path: Path, entries: list[LogEntry], junk: list[bytes], rnd: Any
) -> None:
    lines, _ = build(entries)
    pieces = list(lines)
    for j in junk:
        pieces.insert(rnd.randrange(len(pieces) + 1), j)
    log_path.write_bytes(b"".join(pieces))
    assert_only_log_errors(log_path)


# --------------------------------------------------------------------------- valid logs


@FUZZ
@given(entries_st)
def test_round_trip(log_path: Path, entries: list[LogEntry]) -> None:
    lines, final = build(entries)
    log_path.write_bytes(b"".join(lines))
    reader = read_log(log_path)
    got = list(reader)
    assert [(e.type, e.data, e.ep) for e in got] == [
        (t, orjson.loads(orjson.dumps(d)), ep) for t, d, ep in entries
    ]
    assert reader.last_hash == final and reader.count == len(entries)
    assert verify_log(log_path, expected_final_hash=final, expected_count=len(entries)).ok


@FUZZ
@given(entries_st, st.data())
def test_every_single_byte_edit_is_detected(
    log_path: Path, entries: list[LogEntry], data: Any
) -> None:
    lines, final = build(entries)
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    j = data.draw(st.integers(0, len(lines[i]) - 1), label="byte")
    new = data.draw(st.integers(0, 255).filter(lambda b: b != lines[i][j]), label="new byte")
    edited = list(lines)
    edited[i] = lines[i][:j] + bytes([new]) + lines[i][j + 1 :]
    log_path.write_bytes(b"".join(edited))
    assert_only_log_errors(log_path)
    full = verify_log(log_path, expected_final_hash=final, expected_count=len(lines))
    assert not full.ok
    # The chain alone sees every edit except one that turns the final newline into a
    # torn tail; that one the manifest's final hash and count catch (above).
    last_newline = i == len(lines) - 1 and j == len(lines[i]) - 1
    if not last_newline:
        report = verify_log(log_path)
        assert not report.ok
        assert report.first_bad_line == i + 1
        with pytest.raises(LogError):
            list(read_log(log_path))


@FUZZ
@given(entries_st, st.data())
def test_every_deletion_is_detected(log_path: Path, entries: list[LogEntry], data: Any) -> None:
    lines, final = build(entries)
    i = data.draw(st.integers(0, len(lines) - 1), label="deleted line")
    log_path.write_bytes(b"".join(lines[:i] + lines[i + 1 :]))
    assert not verify_log(log_path, expected_final_hash=final, expected_count=len(lines)).ok
    assert not verify_log(log_path, expected_final_hash=final).ok
    if i < len(lines) - 1:
        report = verify_log(log_path)
        assert not report.ok and report.first_bad_line == i + 1


@FUZZ
@given(entries_st.filter(lambda e: len(e) >= 2), st.data())
def test_every_reordering_and_duplication_is_detected(
    log_path: Path, entries: list[LogEntry], data: Any
) -> None:
    lines, _ = build(entries)
    order = data.draw(st.permutations(range(len(lines))).filter(lambda p: list(p) != sorted(p)))
    log_path.write_bytes(b"".join(lines[k] for k in order))
    report = verify_log(log_path)
    assert not report.ok
    assert report.first_bad_line == next(n for n, k in enumerate(order) if k != n) + 1
    k = data.draw(st.integers(0, len(lines) - 1), label="duplicated line")
    log_path.write_bytes(b"".join(lines[: k + 1] + [lines[k]] + lines[k + 1 :]))
    report = verify_log(log_path)
    assert not report.ok and report.first_bad_line == k + 2


@FUZZ
@given(entries_st, st.data())
def test_truncation_anywhere_yields_exactly_the_complete_lines(
    log_path: Path, entries: list[LogEntry], data: Any
) -> None:
    lines, _ = build(entries)
    blob = b"".join(lines)
    cut = data.draw(st.integers(0, len(blob)), label="cut")
    log_path.write_bytes(blob[:cut])
    reader = read_log(log_path)
    got = list(reader)  # never raises: only the last line can be incomplete
    complete = blob[:cut].count(b"\n")
    assert len(got) == complete
    on_boundary = cut == 0 or blob[cut - 1 : cut] == b"\n"
    assert reader.torn_tail is (not on_boundary)
    assert len(reader.warnings) == (0 if on_boundary else 1)
    assert reader.valid_bytes == sum(len(x) for x in lines[:complete])


@FUZZ
@given(entries_st, st.data())
def test_a_forger_who_rehashes_is_caught_only_by_the_recorded_final_hash(
    log_path: Path, entries: list[LogEntry], data: Any
) -> None:
    lines, final = build(entries)
    i = data.draw(st.integers(0, len(lines) - 1), label="forged line")
    forged = list(entries)
    t, d, ep = forged[i]
    forged[i] = (t, {**d, "forged": True}, ep)
    forged_lines, forged_final = build(forged)
    log_path.write_bytes(b"".join(forged_lines))
    assert verify_log(log_path).ok  # a consistent chain ...
    report = verify_log(log_path, expected_final_hash=final)
    assert not report.ok and forged_final != final  # ... but not the recorded one


def test_hash_rule_matches_an_independent_computation(log_path: Path) -> None:
    lines, final = build([("a", {"x": 1}, None), ("b", {}, "ep")])
    prev = "0" * 64
    for line in lines:
        prev = hashlib.sha256(prev.encode() + b"\n" + line[:-73]).hexdigest()
        assert line[-67:-3].decode() == prev
    assert prev == final
