"""Append-only, hash-chained JSONL event log: one writer, a streaming reader, a verifier.

The log is the only source of truth of a run, so this module is strict about what
it accepts and careful about what it writes. Line format (docs/event-log.md)::

    {"v":1,"seq":N,"type":T,"ts":F,"ep":EP,"data":{...},"h":"<64 hex>"}\\n

The line is ``orjson.dumps`` of the envelope without ``h``, whose closing ``}`` is
replaced by ``,"h":"<hex>"}``. ``body`` is everything before that ``,"h":"``
suffix and ``h_N = sha256(h_{N-1} + "\\n" + body)`` with ``h_{-1} = "0" * 64``.
Because the hash covers the exact bytes, a reader never re-serialises anything.
"""

from __future__ import annotations

import errno
import hashlib
import os
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs
import orjson

from effectbench.core.events import SCHEMA_MAJOR, event_data
from effectbench.log.lines import (
    CHUNK,
    GENESIS_HASH,
    ChainBroken,
    LogCorrupt,
    LogError,
    LoggedEvent,
    LogSchemaError,
    broken_link,
    links,
    read_line,
)

if TYPE_CHECKING:  # anyio is imported by the writer only: a rescore never loads it
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = [
    "GENESIS_HASH",
    "ChainBroken",
    "ChainReport",
    "LogCorrupt",
    "LogEntry",
    "LogError",
    "LogReader",
    "LogSchemaError",
    "LogWriter",
    "LoggedEvent",
    "TailState",
    "encode_line",
    "event_entry",
    "open_log_writer",
    "read_log",
    "scan_tail",
    "verify_log",
    "warn_torn_tail",
    "write_events_sync",
]

_CHUNK: Final = CHUNK
_DEFAULT_BATCH_MAX: Final = 4096
_DEFAULT_BUFFER: Final = 16384

LogEntry: TypeAlias = tuple[str, Mapping[str, Any], str | None]
"""(type, data, ep): one event to write, before seq, ts and hash are assigned."""


def _log() -> Any:
    """structlog's logger, imported when there is something to say: structlog pulls in
    rich (~0.3 s), which a rescore of a sound log never needs."""
    import structlog

    return structlog.get_logger(__name__)


# --------------------------------------------------------------------------- values


@attrs.frozen
class ChainReport:
    """Outcome of verify_log. ``ok`` is False for any corrupt line, broken chain or a
    mismatch with the expected final hash/count; a torn tail alone keeps ``ok``."""

    ok: bool
    count: int
    final_hash: str
    first_bad_line: int | None
    reason: str | None
    torn_tail: bool


@attrs.frozen
class TailState:
    """Where a valid log ends: what an appender needs to continue the chain."""

    count: int
    last_seq: int | None
    last_hash: str
    valid_bytes: int
    torn_tail: bool


# --------------------------------------------------------------------------- encoding


def _default(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"event data value of type {type(obj).__name__} is not JSON-serialisable")


def _dump_data(data: Mapping[str, Any]) -> bytes:
    """Serialise event data up front so a bad payload fails at the caller, not the writer."""
    if type(data) is not dict:
        if not isinstance(data, Mapping):
            raise TypeError(f"event data must be a mapping, got {type(data).__name__}")
        data = dict(data)
    return orjson.dumps(data, default=_default)


def _encode(
    prev: bytes, seq: int, type_: str, ts: float, ep: str | None, data_json: bytes
) -> tuple[bytes, bytes]:
    """Bytes of one line and its hash (ascii hex), given the previous hash as ascii hex.

    The body is byte-identical to ``orjson.dumps(envelope)`` minus its closing brace.
    """
    body = b'{"v":%d,"seq":%d,"type":%b,"ts":%b,"ep":%b,"data":%b' % (
        SCHEMA_MAJOR,
        seq,
        orjson.dumps(type_),
        orjson.dumps(ts),
        orjson.dumps(ep),
        data_json,
    )
    h = hashlib.sha256(prev + b"\n" + body).hexdigest().encode()
    return body + b',"h":"' + h + b'"}\n', h


def encode_line(
    prev_hash: str, seq: int, type: str, ts: float, ep: str | None, data: Mapping[str, Any]
) -> tuple[bytes, str]:
    """One log line (with its newline) and the new chain hash."""
    line, h = _encode(prev_hash.encode("ascii"), seq, type, ts, ep, _dump_data(data))
    return line, h.decode("ascii")


def event_entry(event: Any, ep: str | None = None) -> LogEntry:
    """(type, data, ep) for a typed event from effectbench.events."""
    return (event.TYPE, event_data(event), ep)


# --------------------------------------------------------------------------- reading


class LogReader:
    """Streams LoggedEvents from a log file, checking every line as it goes.

    Iterate it once; afterwards ``count``, ``last_seq``, ``last_hash``, ``torn_tail``,
    ``valid_bytes`` and ``warnings`` describe what was read. Iterating again re-reads.
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        self.path = Path(path)
        self.verify = verify
        self._reset()

    def _reset(self) -> None:
        self.count = 0
        self.last_seq: int | None = None
        self.last_hash = GENESIS_HASH
        self.torn_tail = False
        self.valid_bytes = 0
        self.warnings: list[str] = []

    def __iter__(self) -> Iterator[LoggedEvent]:
        self._reset()
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed in the generator below
        except FileNotFoundError:
            raise LogError(f"no event log at {self.path}; check the path or run first") from None
        except IsADirectoryError:
            raise LogError(f"{self.path} is a directory, not an event log file") from None
        except OSError as e:
            raise LogError(f"cannot open event log {self.path}: {e.strerror or e}") from None
        return self._events(f)

    def _events(self, f: Any) -> Iterator[LoggedEvent]:
        # Hot loop (rescoring reads millions of lines): per line the one line check
        # (effectbench.log.lines: suffix, orjson.loads, envelope, LoggedEvent) and one
        # sha256. Every complete line is valid or raises, so line number == n + 1.
        verify = self.verify
        prev = GENESIS_HASH.encode()
        n = 0
        offset = 0  # bytes of the valid prefix up to the current chunk
        n_chunk = 0  # n at the start of the current chunk
        lines: list[bytes] = []
        tail = b""
        try:
            with f:
                while True:
                    try:
                        chunk = f.read(_CHUNK)
                    except OSError as e:
                        raise LogError(
                            f"cannot read event log {self.path}: {e.strerror or e}"
                        ) from None
                    if not chunk:
                        break
                    size = len(tail) + len(chunk)
                    lines = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
                    tail = lines.pop()
                    n_chunk = n
                    for line in lines:
                        event = read_line(line, n)
                        h = line[-66:-2]
                        if verify and not links(prev, line):
                            raise broken_link(n + 1, n)
                        prev = h
                        n += 1
                        yield event
                    offset += size - len(tail)
                    n_chunk = n
        finally:
            # State of the valid prefix, also when a corrupt line or the caller stopped us.
            self.count = n
            self.valid_bytes = offset + sum(len(x) + 1 for x in lines[: n - n_chunk])
            self.last_seq = n - 1 if n else None
            self.last_hash = prev.decode("ascii")
        if tail:
            self.torn_tail = True
            self.warnings.append(warn_torn_tail(self.path, n + 1, len(tail)))


_TORN_WARNED: set[tuple[str, int, int]] = set()
"""Torn tails already warned about by this process: ``verify`` reads a log three times,
and one incomplete line is one warning."""


def warn_torn_tail(path: str | os.PathLike[str], line_no: int, nbytes: int) -> str:
    """Log (once per process) and return the warning for an incomplete last line, which
    readers skip."""
    key = (os.path.abspath(path), line_no, nbytes)
    if key not in _TORN_WARNED:
        _TORN_WARNED.add(key)
        _log().warning("event_log.torn_tail", path=str(path), line=line_no, bytes=nbytes)
    return (
        f"{path}: line {line_no} is incomplete ({nbytes} bytes, no newline; "
        "the writer was probably killed mid-write) and was ignored"
    )


def read_log(path: str | os.PathLike[str], *, verify: bool = True) -> LogReader:
    """A lazy reader over a log file; see LogReader. Raises LogError subclasses only."""
    return LogReader(path, verify=verify)


def scan_tail(path: str | os.PathLike[str]) -> TailState:
    """Read and verify a whole log and say where its valid part ends (for appending)."""
    reader = LogReader(path, verify=True)
    for _ in reader:
        pass
    return TailState(
        count=reader.count,
        last_seq=reader.last_seq,
        last_hash=reader.last_hash,
        valid_bytes=reader.valid_bytes,
        torn_tail=reader.torn_tail,
    )


def verify_log(
    path: str | os.PathLike[str],
    *,
    expected_final_hash: str | None = None,
    expected_count: int | None = None,
) -> ChainReport:
    """Recompute the chain; never raises for bad content, only reports.

    The chain alone cannot see a removed *last* line, so pass the final hash (and
    count) recorded in the run manifest to catch that too.
    """
    reader = LogReader(path, verify=True)
    try:
        for _ in reader:
            pass
    except LogCorrupt as e:
        return ChainReport(False, reader.count, reader.last_hash, e.line_no, e.reason, False)
    except LogError as e:
        return ChainReport(False, 0, GENESIS_HASH, None, str(e), False)
    reason = None
    first_bad: int | None = None
    if expected_count is not None and reader.count != expected_count:
        reason = f"log has {reader.count} events where {expected_count} were recorded"
        first_bad = min(reader.count, expected_count) + 1
    elif expected_final_hash is not None and reader.last_hash != expected_final_hash:
        reason = (
            f"final hash {reader.last_hash} differs from the recorded {expected_final_hash}: "
            "lines were removed from or added to the end"
        )
    return ChainReport(
        ok=reason is None,
        count=reader.count,
        final_hash=reader.last_hash,
        first_bad_line=first_bad,
        reason=reason,
        torn_tail=reader.torn_tail,
    )


# --------------------------------------------------------------------------- writing


def _prepare(path: Path, append: bool) -> TailState:
    """Check the file can be written (new) or continued (append); truncate a torn tail."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = -1
    except OSError as e:
        raise LogError(f"cannot open event log {path}: {e.strerror or e}") from None
    if not append:
        if size > 0:
            raise LogError(
                f"event log {path} already exists and is not empty; resume it (append) or "
                "choose a new output path, it will not be overwritten"
            )
        return TailState(0, None, GENESIS_HASH, 0, False)
    if size <= 0:
        return TailState(0, None, GENESIS_HASH, 0, False)
    try:
        state = scan_tail(path)
    except LogCorrupt as e:
        raise LogError(
            f"cannot append to event log {path}: line {e.line_no}: {e.reason}; "
            "run `effectbench verify` on it and start a new log"
        ) from None
    if state.torn_tail:
        _log().warning(
            "event_log.truncated_torn_tail",
            path=str(path),
            dropped_bytes=size - state.valid_bytes,
            kept_events=state.count,
        )
        try:
            os.truncate(path, state.valid_bytes)
        except OSError as e:
            raise LogError(
                f"cannot truncate the torn last line of {path}: {e.strerror or e}"
            ) from None
    return state


def _open_for_write(path: Path, append: bool) -> Any:
    try:
        return open(path, "ab" if append else "wb")
    except OSError as e:
        raise LogError(f"cannot write event log {path}: {e.strerror or e}") from None


_Item: TypeAlias = tuple[str, str | None, bytes, float | None]  # type, ep, serialised data, ts


class LogWriter:
    """Handle for emitting events; only the writer task started by open_log_writer writes.

    ``emit`` serialises ``data`` (so a bad payload raises at the caller) and queues it;
    it waits only when the queue is full. The writer stamps ``ts`` per batch, so ``ts``
    never decreases along ``seq`` (unless the wall clock itself steps back, or an event
    brings its own ``ts`` from a Dask worker). After the context
    exits, ``count`` (events in the whole file), ``written`` (by this writer),
    ``last_seq`` and ``last_hash`` describe the log (the manifest records the hash).
    """

    def __init__(self, path: Path, send: MemoryObjectSendStream[_Item], state: TailState) -> None:
        import anyio

        self._full: type[Exception] = anyio.WouldBlock
        self._gone: tuple[type[Exception], ...] = (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        )
        self.path = path
        self._send = send
        self._prev = state.last_hash.encode("ascii")
        self._next = state.count
        self._start = state.count
        self._error: BaseException | None = None

    @property
    def count(self) -> int:
        return self._next

    @property
    def written(self) -> int:
        return self._next - self._start

    @property
    def last_seq(self) -> int | None:
        return self._next - 1 if self._next else None

    @property
    def last_hash(self) -> str:
        return self._prev.decode("ascii")

    async def emit(
        self, type: str, data: Mapping[str, Any], ep: str | None = None, ts: float | None = None
    ) -> None:
        """Queue one event. Raises TypeError for bad input, LogError if the writer died.

        ``ts`` keeps the time an event happened elsewhere (an episode run on a Dask
        worker); None stamps it when written. seq and hash are always assigned here."""
        if type.__class__ is not str or not type:
            raise TypeError(f"event type must be a non-empty string, got {type!r}")
        if ep is not None and ep.__class__ is not str:
            raise TypeError(f"episode key must be a string or None, got {ep!r}")
        item = (type, ep, _dump_data(data), ts)
        try:
            try:
                self._send.send_nowait(item)
            except self._full:
                await self._send.send(item)
        except self._gone:
            raise LogError(self._dead_message()) from self._error

    async def emit_event(self, event: Any, ep: str | None = None) -> None:
        """Queue a typed event from effectbench.events."""
        await self.emit(event.TYPE, event_data(event), ep)

    def _dead_message(self) -> str:
        if self._error is not None:
            return f"event log writer for {self.path} stopped: {self._error}"
        return f"event log writer for {self.path} is closed"

    async def _run(self, receive: MemoryObjectReceiveStream[_Item], f: Any, batch_max: int) -> None:
        import anyio

        # Shielded: once an event is accepted it is written, even if the run is cancelled;
        # the loop ends when the send side closes (always, in open_log_writer's finally).
        with anyio.CancelScope(shield=True):
            async with receive:
                async for first in receive:
                    batch = [first]
                    while len(batch) < batch_max:
                        try:
                            batch.append(receive.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    try:
                        self._write(batch, f)
                    except Exception as e:  # noqa: BLE001 - reported by open_log_writer
                        self._error = e
                        _log().error("event_log.write_failed", path=str(self.path), error=str(e))
                        return

    def _write(self, batch: list[_Item], f: Any) -> None:
        prev = self._prev
        seq = self._next
        ts = time.time()  # one stamp per batch: the lines reach the file together
        parts = []
        for type_, ep, data_json, at in batch:
            line, prev = _encode(prev, seq, type_, ts if at is None else at, ep, data_json)
            parts.append(line)
            seq += 1
        f.write(b"".join(parts))
        f.flush()
        self._prev = prev
        self._next = seq


@asynccontextmanager
async def open_log_writer(
    path: str | os.PathLike[str],
    *,
    append: bool = False,
    batch_max: int = _DEFAULT_BATCH_MAX,
    buffer_size: int = _DEFAULT_BUFFER,
    fsync: bool = True,
) -> AsyncIterator[LogWriter]:
    """Open a log for writing and run its single writer task for the block's duration.

    A new log refuses a non-empty existing file. ``append=True`` verifies the existing
    chain, drops a torn final line, and continues seq and hash. Every accepted event
    is on disk (flushed; fsynced if ``fsync``) when the block exits, even on error.
    """
    if batch_max < 1 or buffer_size < 1:
        raise ValueError("batch_max and buffer_size must be >= 1")
    import anyio

    p = Path(path)
    state = _prepare(p, append)
    f = _open_for_write(p, append)
    send, receive = anyio.create_memory_object_stream[_Item](buffer_size)
    writer = LogWriter(p, send, state)
    body_error: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer._run, receive, f, batch_max)
            try:
                yield writer
            except Exception as e:  # noqa: BLE001 - re-raised below, after the queue is written
                body_error = e
            finally:
                send.close()
    finally:
        with anyio.CancelScope(shield=True):
            close_error = await _close(f, fsync)
    if body_error is not None:
        raise body_error
    if writer._error is not None:
        raise LogError(writer._dead_message()) from writer._error
    if close_error is not None:
        raise LogError(f"event log {p} could not be closed cleanly: {close_error}") from close_error


async def _close(f: Any, fsync: bool) -> OSError | None:
    """Flush, fsync (where the file type supports it) and close; report, never raise."""
    import anyio

    error: OSError | None = None
    try:
        f.flush()
        if fsync:
            await anyio.to_thread.run_sync(os.fsync, f.fileno())
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EROFS):  # not a regular file
            error = e
    try:
        f.close()
    except OSError as e:
        error = error or e
    return error


def write_events_sync(
    path: str | os.PathLike[str],
    entries: Iterable[LogEntry],
    *,
    append: bool = False,
    ts: float | None = None,
) -> TailState:
    """Write events without an event loop (tests, benches, fixtures); same format.

    ``ts`` fixes every timestamp (for byte-identical fixtures); default is wall time.
    """
    p = Path(path)
    state = _prepare(p, append)
    prev = state.last_hash.encode("ascii")
    seq = state.count
    f = _open_for_write(p, append)
    with f:
        parts: list[bytes] = []
        for type_, data, ep in entries:
            line, prev = _encode(
                prev, seq, type_, time.time() if ts is None else ts, ep, _dump_data(data)
            )
            parts.append(line)
            seq += 1
            if len(parts) >= _DEFAULT_BATCH_MAX:
                f.write(b"".join(parts))
                parts.clear()
        f.write(b"".join(parts))
        f.flush()
        size = f.tell()
    return TailState(seq, seq - 1 if seq else None, prev.decode("ascii"), size, False)
