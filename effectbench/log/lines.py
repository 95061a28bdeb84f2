"""What makes one line of the log a valid event: the one home of the line check.

The streaming reader (``LogReader``) and the sharded rescore (``outputs/parallel.py``)
both call ``read_line`` and ``links``, so a line one of them accepts the other accepts
too, and a line either refuses fails with the same ``LogCorrupt``. Kept free of heavy
imports: a rescore's start-up pays for this module on every run.

Line format (docs/event-log.md)::

    {"v":1,"seq":N,"type":T,"ts":F,"ep":EP,"data":{...},"h":"<64 hex>"}\\n

``body`` is everything before the ``,"h":"`` suffix and
``h_N = sha256(h_{N-1} + "\\n" + body_N)`` with ``h_{-1} = "0" * 64``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final, NamedTuple

import attrs
import orjson

from effectbench.core.errors import EffectBenchError
from effectbench.core.events import SCHEMA_MAJOR

__all__ = [
    "CHUNK",
    "GENESIS_HASH",
    "ChainBroken",
    "LineEvent",
    "LogCorrupt",
    "LogError",
    "LogSchemaError",
    "LoggedEvent",
    "broken_link",
    "check_line",
    "event_of",
    "links",
    "read_line",
]

GENESIS_HASH: Final = "0" * 64
CHUNK: Final = 1 << 22
"""Bytes read at a time: large enough that the per-read cost vanishes, small enough that
a worker's buffer stays a few MB."""
SUFFIX_HEAD: Final = b',"h":"'
SUFFIX_LEN: Final = 72  # len(',"h":"') + 64 hex + len('"}')


# --------------------------------------------------------------------------- errors


class LogError(EffectBenchError):
    """Anything wrong with a log file; the message says what and what to do."""


class LogCorrupt(LogError):
    """A complete line (not a torn tail) that is not a valid event."""

    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(f"line {line_no}: {reason}")
        self.line_no = line_no
        self.reason = reason


class ChainBroken(LogCorrupt):
    """A well-formed line whose hash does not chain to the previous line: it was edited,
    deleted, reordered or written by something else."""


class LogSchemaError(LogCorrupt):
    """A line of a schema major this build cannot read."""


# --------------------------------------------------------------------------- the event


@attrs.frozen(slots=True)
class LoggedEvent:
    """One event as read back from the log; ``line_no`` is 1-based."""

    seq: int
    type: str
    ts: float
    ep: str | None
    data: dict[str, Any]
    line_no: int


# read_line fills LoggedEvent's slots directly: the fields are already checked, and
# attrs' frozen __init__ (object.__setattr__ per field) is ~10% of a verified read.
_SLOT_SETTERS: Final = tuple(
    LoggedEvent.__dict__[a.name].__set__ for a in attrs.fields(LoggedEvent)
)
_SET_SEQ, _SET_TYPE, _SET_TS, _SET_EP, _SET_DATA, _SET_LINE = _SLOT_SETTERS


# --------------------------------------------------------------------------- the check


def read_line(
    line: bytes,
    n: int,
    _loads: Any = orjson.loads,
    _new: Any = object.__new__,
    _cls: Any = LoggedEvent,
) -> LoggedEvent:
    """The event on line ``n + 1`` (its seq must be ``n``), or LogCorrupt saying exactly
    why not. The hash link is checked apart (``links``): a sharded pass hashes only the
    lines it owns."""
    if line[-72:-66] != b',"h":"' or line[-2:] != b'"}':
        raise _suffix_problem(line, n + 1)
    try:
        obj = _loads(line)
        v = obj["v"]
        seq = obj["seq"]
        type_ = obj["type"]
        ts = obj["ts"]
        ep = obj["ep"]
        data = obj["data"]
    except Exception:  # noqa: BLE001 - _diagnose names the exact problem
        raise _diagnose(line, n + 1, n) from None
    if (
        v != SCHEMA_MAJOR
        or seq != n
        or type(seq) is not int
        or type(v) is not int
        or type(type_) is not str
        or type(data) is not dict
        or (type(ts) is not float and type(ts) is not int)
        or (ep is not None and type(ep) is not str)
    ):
        raise _diagnose(line, n + 1, n)
    event = _new(_cls)
    _SET_SEQ(event, n)
    _SET_TYPE(event, type_)
    _SET_TS(event, ts)
    _SET_EP(event, ep)
    _SET_DATA(event, data)
    _SET_LINE(event, n + 1)
    return event  # type: ignore[no-any-return]


def check_line(
    line: bytes,
    n: int,
    prev: bytes,
    _loads: Any = orjson.loads,
    _sha256: Any = hashlib.sha256,
) -> dict[str, Any] | None:
    """``read_line`` and ``links`` in one call, for a pass that builds an event only for
    the lines it keeps: the line's parsed object when it is the valid event of seq ``n``
    and chains from ``prev``, else None (``read_line`` then says why). The checks are
    read_line's, spelled once more inline (this runs for every line of a sharded
    rescore, where a call and a LoggedEvent per line are a fifth of the line's cost);
    tests/log/test_line_check.py checks both accept exactly the same lines."""
    if line[-72:-66] != b',"h":"' or line[-2:] != b'"}':
        return None
    try:
        obj = _loads(line)
        v = obj["v"]
        seq = obj["seq"]
        ts = obj["ts"]
        ep = obj["ep"]
        if (
            v != SCHEMA_MAJOR
            or seq != n
            or type(seq) is not int
            or type(v) is not int
            or type(obj["type"]) is not str
            or type(obj["data"]) is not dict
            or (type(ts) is not float and type(ts) is not int)
            or (ep is not None and type(ep) is not str)
        ):
            return None
    except Exception:  # noqa: BLE001 - not an event; read_line names the problem
        return None
    if _sha256(prev + b"\n" + line[:-72]).hexdigest().encode() != line[-66:-2]:
        return None
    return obj  # type: ignore[no-any-return]


class LineEvent(NamedTuple):
    """What a pass that folds keeps of a line ``check_line`` accepted: the fields the
    projection reads, as a tuple (a tenth of a LoggedEvent's cost to build)."""

    seq: int
    type: str
    ep: str | None
    data: dict[str, Any]


def event_of(obj: dict[str, Any], n: int, _new: Any = tuple.__new__) -> LineEvent:
    """The LineEvent of a line ``check_line`` accepted as seq ``n``."""
    return _new(LineEvent, (n, obj["type"], obj["ep"], obj["data"]))  # type: ignore[no-any-return]


def links(prev: bytes, line: bytes, _sha256: Any = hashlib.sha256) -> bool:
    """Whether ``line`` (suffix already checked) chains from ``prev``, the previous line's
    stored hash as ascii hex."""
    return bool(_sha256(prev + b"\n" + line[:-72]).hexdigest().encode() == line[-66:-2])


def broken_link(line_no: int, seq: int) -> ChainBroken:
    return ChainBroken(
        line_no,
        f"hash does not chain from the previous line (seq {seq}): this "
        "line or an earlier one was edited, removed or reordered",
    )


def _suffix_problem(line: bytes, line_no: int) -> LogCorrupt:
    """Why a line lacks the hash suffix; a line of another schema major (whose line format
    may differ) is refused as such, naming both majors."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        obj = None
    if type(obj) is dict and type(obj.get("v")) is int and obj["v"] != SCHEMA_MAJOR:
        return _diagnose(line, line_no, -1)
    if not line:
        return LogCorrupt(line_no, "empty line")
    if len(line) < SUFFIX_LEN:
        return LogCorrupt(line_no, f"line too short to be an event ({len(line)} bytes)")
    return LogCorrupt(line_no, 'line does not end with the chain hash suffix ,"h":"<64 hex>"}')


def _diagnose(line: bytes, line_no: int, expect: int) -> LogCorrupt:
    """The precise reason a line failed the fast checks (off the hot path)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        return LogCorrupt(line_no, f"not valid JSON ({e})")
    if type(obj) is not dict:
        return LogCorrupt(line_no, f"expected a JSON object, got {type(obj).__name__}")
    if "v" not in obj:
        return LogCorrupt(line_no, "missing field 'v' (schema major)")
    v = obj["v"]
    if type(v) is not int:
        return LogCorrupt(line_no, f"field 'v' must be an integer, got {v!r}")
    if v != SCHEMA_MAJOR:
        return LogSchemaError(
            line_no,
            f"log schema major {v} is not supported; this build of effectbench reads major "
            f"{SCHEMA_MAJOR} (use an effectbench release that supports major {v})",
        )
    for name in ("seq", "type", "ts", "ep", "data"):
        if name not in obj:
            return LogCorrupt(line_no, f"missing field {name!r}")
    seq = obj["seq"]
    if type(seq) is not int:
        return LogCorrupt(line_no, f"field 'seq' must be an integer, got {seq!r}")
    if seq != expect:
        return LogCorrupt(
            line_no,
            f"seq {seq} where {expect} was expected: a line is missing, duplicated or out of order",
        )
    if type(obj["type"]) is not str:
        return LogCorrupt(line_no, "field 'type' must be a string")
    if type(obj["ts"]) not in (int, float):
        return LogCorrupt(line_no, "field 'ts' must be a number")
    if obj["ep"] is not None and type(obj["ep"]) is not str:
        return LogCorrupt(line_no, "field 'ep' must be a string or null")
    if type(obj["data"]) is not dict:
        return LogCorrupt(line_no, "field 'data' must be an object")
    return LogCorrupt(line_no, "malformed event")
