"""``check_line`` (the sharded rescore's one call per line) accepts exactly the lines
``read_line`` plus ``links`` accept, and gives the same fields: the sharded pass may
never take a line the one-process pass refuses, nor refuse one it takes."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from effectbench.log.lines import GENESIS_HASH, LogCorrupt, check_line, event_of, links, read_line
from effectbench.log.reader import encode_line

SETTINGS = settings(max_examples=300, deadline=None)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)

PREV = b"ab" * 32


def _line(seq: int, type_: str, ep: str | None, data: dict[str, Any], prev: bytes = PREV) -> bytes:
    line, _ = encode_line(prev.decode(), seq, type_, 1.5, ep, data)
    return line.rstrip(b"\n")


def _one_process(line: bytes, n: int, prev: bytes) -> Any:
    """What the reader makes of a line: the event, or None when it refuses it."""
    try:
        event = read_line(line, n)
    except LogCorrupt:
        return None
    return event if links(prev, line) else None


def _agree(line: bytes, n: int, prev: bytes) -> None:
    obj = check_line(line, n, prev)
    event = _one_process(line, n, prev)
    assert (obj is None) == (event is None), line
    if obj is not None:
        light = event_of(obj, n)
        assert (light.seq, light.type, light.ep, light.data) == (
            event.seq,
            event.type,
            event.ep,
            event.data,
        )


@SETTINGS
@given(
    seq=st.integers(min_value=0, max_value=10**6),
    type_=st.text(min_size=1, max_size=12),
    ep=st.none() | st.text(max_size=12),
    data=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    at=st.integers(min_value=0, max_value=10**4),
    byte=st.integers(min_value=0, max_value=255),
    how=st.sampled_from(["keep", "flip", "cut", "insert", "seq", "prev"]),
)
def test_check_line_accepts_what_the_reader_accepts(
    seq: int, type_: str, ep: str | None, data: dict[str, Any], at: int, byte: int, how: str
) -> None:
    line = _line(seq, type_, ep, data)
    n, prev = seq, PREV
    i = at % (len(line) + 1)
    if how == "flip" and i < len(line):
        line = line[:i] + bytes([byte]) + line[i + 1 :]
    elif how == "cut":
        line = line[:i]
    elif how == "insert":
        line = line[:i] + bytes([byte]) + line[i:]
    elif how == "seq":
        n = seq + 1 + at % 3
    elif how == "prev":
        prev = GENESIS_HASH.encode()
    _agree(line, n, prev)


def _raw(body: bytes, prev: bytes = PREV) -> bytes:
    """A line with this body and its true hash: only the envelope can be wrong."""
    import hashlib

    h = hashlib.sha256(prev + b"\n" + body).hexdigest().encode()
    return body + b',"h":"' + h + b'"}'


def test_check_line_refuses_every_bad_envelope_the_reader_refuses() -> None:
    good = b'{"v":1,"seq":3,"type":"episode.action","ts":1.5,"ep":"a::b::t0","data":{}'
    bodies = [
        good,
        good.replace(b'"v":1', b'"v":2'),
        good.replace(b'"v":1', b'"v":true'),
        good.replace(b'"v":1', b'"v":1.0'),
        good.replace(b'"seq":3', b'"seq":3.0'),
        good.replace(b'"seq":3', b'"seq":true'),
        good.replace(b'"seq":3', b'"seq":4'),
        good.replace(b'"type":"episode.action"', b'"type":7'),
        good.replace(b'"ts":1.5', b'"ts":"1.5"'),
        good.replace(b'"ts":1.5', b'"ts":true'),
        good.replace(b'"ts":1.5', b'"ts":2'),
        good.replace(b'"ep":"a::b::t0"', b'"ep":null'),
        good.replace(b'"ep":"a::b::t0"', b'"ep":5'),
        good.replace(b'"data":{}', b'"data":[]'),
        good.replace(b'"data":{}', b'"data":null'),
        good.replace(b',"ep":"a::b::t0"', b""),
        good + b',"v":2',  # a repeated key: the last one counts, for both
        good + b',"seq":9',
        good.replace(b"episode.action", b"episode.\xff"),  # not UTF-8
        b"[1,2,3" + b" " * 80,
    ]
    for body in bodies:
        _agree(_raw(body), 3, PREV)
    assert check_line(_raw(good), 3, PREV) is not None  # the control is accepted
    assert orjson.loads(_raw(good))["seq"] == 3
