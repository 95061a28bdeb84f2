"""A sharded log pass for large rescores: the second core verifies half the chain and
folds half the episodes.

Every line stores its own hash, so the link into line N can be checked from line N-1's
stored hash alone: ``sha256(h[N-1] + "\\n" + body[N]) == h[N]``. Worker ``w`` of ``W``
therefore reads every line but hashes only those with ``N % W == w``, and parses and
folds only the episodes whose id falls in its shard (a stable function of the id's
bytes, so an episode never spans two workers); run-level lines are parsed by all.
Each worker keeps the usual slot-based MetricsAccumulator and spills result rows to
its own file; the parent merges the slots ("the later record of an episode wins", by
the Projector's order key) and copies the rows out in plan order.

The worker dies with the rescore that forked it (SIGKILL, SIGTERM, anything): it
holds no end of the pipe but its own, asks Linux for SIGKILL when its parent dies,
and writes to /dev/null rather than the caller's stdout and stderr, so a killed
rescore never leaves a process behind that keeps a caller's stderr pipe open.

Nothing here reports problems. Any failure in any worker (a bad line, a broken link,
a protocol violation, a crashed process) makes ``sharded_pass`` return None, and the
caller runs the one-process pass, which raises exactly the error it always raised. So
the sharded pass only ever changes how fast a sound log is scored, never what a
broken one says.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
from array import array
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.core.events import SCHEMA_MAJOR
from effectbench.log.reader import _CHUNK, _SLOT_SETTERS, GENESIS_HASH, LoggedEvent, warn_torn_tail
from effectbench.outputs.logpass import LogPass, RunFacts, Spill
from effectbench.outputs.rows import ROW_OPTS, record_row
from effectbench.projections.metrics import TELEMETRY_FIELDS, MetricsAccumulator

__all__ = ["MIN_PARALLEL_BYTES", "shard_of", "sharded_pass", "worker_count"]

MIN_PARALLEL_BYTES: Final = 8 << 20
"""Below ~25,000 events the fork, the pipe and the merge cost more than a core saves."""

_TRIAL_RUN: Final = 64
"""Consecutive trials of one (arm, task) stay in one shard, so results rows (plan order:
arm, task, trial) come out of each worker's spill in runs, not one pread per row."""
_CACHE_MAX: Final = 1 << 14
_PR_SET_PDEATHSIG: Final = 1


class _Unsound(Exception):
    """Something a worker will not decide; the one-process pass will."""


def worker_count(log_path: Path) -> int:
    """2 for a large log on a machine with a free core and fork; 1 otherwise.

    Fork is only safe while this process runs one thread (a lock held by another
    thread would stay locked in the child), so a caller with threads gets 1.
    """
    try:
        size = log_path.stat().st_size
    except OSError:
        return 1
    if size < MIN_PARALLEL_BYTES or threading.active_count() != 1:
        return 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 1


def shard_of(ep: bytes, workers: int) -> int:
    """The worker that folds episode ``ep`` (its id's bytes as logged)."""
    import zlib

    head, sep, trial = ep.rpartition(b"::t")
    if sep and trial.isdigit():
        return (zlib.crc32(head) + int(trial) // _TRIAL_RUN) % workers
    return zlib.crc32(ep) % workers


def _valid_end(path: Path) -> tuple[int, int]:
    """(bytes up to and including the last newline, bytes after it: a torn tail)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = size
        while pos > 0:
            step = min(1 << 16, pos)
            pos -= step
            block = os.pread(f.fileno(), step, pos)
            i = block.rfind(b"\n")
            if i >= 0:
                end = pos + i + 1
                return end, size - end
    return 0, size


@attrs.define
class _Shard:
    """One worker's part: the accumulator, the order key per slot, its spill."""

    facts: RunFacts
    acc: MetricsAccumulator | None
    keys: array[int] | None
    spill: Spill | None
    count: int
    last_hash: bytes
    episodes: int


def _scan(path: Path, end: int, w: int, workers: int, root: Path, spill_file: Any = None) -> _Shard:
    """Worker ``w``'s pass over the first ``end`` bytes; raises on anything unsound."""
    from effectbench.projections.episodes import Projector

    loads = orjson.loads
    dumps = orjson.dumps
    sha256 = hashlib.sha256
    head = b',"h":"'
    major = SCHEMA_MAJOR
    new = object.__new__
    cls = LoggedEvent
    set_seq, set_type, set_ts, set_ep, set_data, set_line = _SLOT_SETTERS
    facts = RunFacts()
    proj = Projector()
    feed = proj.feed
    acc: MetricsAccumulator | None = None
    keys: array[int] | None = None
    spill: Spill | None = None
    shards: dict[bytes, int] = {}
    prev = GENESIS_HASH.encode()
    n = 0
    episodes = 0
    pos = 0
    tail = b""
    try:
        with open(path, "rb") as f:
            while pos < end:
                chunk = f.read(min(_CHUNK, end - pos))
                if not chunk:
                    raise _Unsound("the log shrank while it was read")
                pos += len(chunk)
                lines = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
                tail = lines.pop()
                for line in lines:
                    hashed = n % workers == w
                    if hashed and (
                        line[-72:-66] != head
                        or line[-2:] != b'"}'
                        or sha256(prev + b"\n" + line[:-72]).hexdigest().encode() != line[-66:-2]
                    ):
                        raise _Unsound(f"line {n + 1}")
                    prev = line[-66:-2]
                    i = line.find(b',"ep":')
                    if i < 0:
                        raise _Unsound(f"line {n + 1}")
                    if line[i + 6] == 0x6E:  # n of null: a run-level line, every worker reads it
                        epb = None
                    else:
                        j = line.find(b'","data":', i)
                        if j < 0:
                            raise _Unsound(f"line {n + 1}")
                        epb = line[i + 7 : j]
                        s = shards.get(epb)
                        if s is None:
                            if len(shards) >= _CACHE_MAX:
                                shards.clear()
                            s = shards[epb] = shard_of(epb, workers)
                        if s != w:
                            n += 1
                            continue
                    # the checks LogReader makes, for the lines this worker owns
                    if not hashed and (line[-72:-66] != head or line[-2:] != b'"}'):
                        raise _Unsound(f"line {n + 1}")
                    obj = loads(line)
                    v = obj["v"]
                    seq = obj["seq"]
                    type_ = obj["type"]
                    ts = obj["ts"]
                    ep = obj["ep"]
                    data = obj["data"]
                    if (
                        v != major
                        or seq != n
                        or type(seq) is not int
                        or type(v) is not int
                        or type(type_) is not str
                        or type(data) is not dict
                        or (type(ts) is not float and type(ts) is not int)
                        or (ep is not None and type(ep) is not str)
                        or (epb is None and ep is not None)
                        or (epb is not None and (ep is None or ep.encode() != epb))
                    ):
                        raise _Unsound(f"line {n + 1}")
                    event = new(cls)
                    set_seq(event, n)
                    set_type(event, type_)
                    set_ts(event, ts)
                    set_ep(event, ep)
                    set_data(event, data)
                    n += 1
                    set_line(event, n)
                    if ep is None:
                        facts.see(event)
                        feed(event)  # run.started names the scoring version
                        continue
                    if facts.started is None:
                        facts.too_early(event)
                    rec = feed(event)
                    if rec is None:
                        continue
                    if acc is None:
                        acc = MetricsAccumulator(facts.plan_facts().index)
                        keys = array("q", [-1]) * len(acc.plan)
                        spill = Spill(root, len(acc.plan), spill_file)
                    assert keys is not None and spill is not None
                    slot = acc.add(rec)
                    keys[slot] = event.seq
                    spill.put(slot, dumps(record_row(rec), option=ROW_OPTS) + b"\n")
                    episodes += 1
            if tail:
                raise _Unsound("a line crosses the end of the valid part")
        for key, rec in proj.drain():
            if acc is None:
                acc = MetricsAccumulator(facts.plan_facts().index)
                keys = array("q", [-1]) * len(acc.plan)
                spill = Spill(root, len(acc.plan), spill_file)
            assert keys is not None and spill is not None
            slot = acc.add(rec)
            keys[slot] = key
            spill.put(slot, dumps(record_row(rec), option=ROW_OPTS) + b"\n")
            episodes += 1
        facts.plan_facts()  # a log without its plan is the one-process pass's to report
    except BaseException:
        if spill is not None:
            spill.close()
        raise
    return _Shard(facts, acc, keys, spill, n, prev, episodes)


def _export(shard: _Shard) -> dict[str, Any]:
    """A child's part: its filled slots with their key, code, telemetry and row position."""
    acc, keys, spill = shard.acc, shard.keys, shard.spill
    part: dict[str, Any] = {
        "count": shard.count,
        "last_hash": shard.last_hash,
        "episodes": shard.episodes,
        "records": 0,
        "slots": array("q"),
    }
    if acc is None or keys is None or spill is None:
        return part
    spill.file.flush()
    slots = array("q", (s for s, k in enumerate(keys) if k >= 0))
    part.update(
        records=acc.records,
        slots=slots,
        keys=array("q", (keys[s] for s in slots)),
        codes=bytes(acc.codes[s] for s in slots),
        offsets=array("q", (spill.offsets[s] for s in slots)),
        lengths=array("q", (spill.lengths[s] for s in slots)),
    )
    for name in TELEMETRY_FIELDS:
        col = acc.telemetry[name]
        part["t_" + name] = array("d", (col[s] for s in slots))
    return part


def _ask_for_death_signal() -> None:
    """prctl(PR_SET_PDEATHSIG, SIGKILL): the kernel kills this process when its parent
    dies. Linux only; elsewhere the closed pipe end still ends the worker at its send."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _die_with(parent: int, parents_end: Any) -> None:
    """Tie the forked worker's life to ``parent``'s.

    The parent's end of the pipe is closed first: held here, it would keep the pipe
    readable after the parent died, and a send larger than the pipe's buffer would then
    block for ever. The death signal covers a parent killed while the worker scans (the
    check after it, a parent that died before it was asked for). stdout and stderr go
    to /dev/null, so a caller reading the rescore's stderr is never kept waiting by it.
    """
    parents_end.close()
    _ask_for_death_signal()
    if os.getppid() != parent:
        os._exit(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    finally:
        os.close(devnull)


def _child(
    conn: Any,
    parents_end: Any,
    parent: int,
    path: Path,
    end: int,
    w: int,
    workers: int,
    root: Path,
    spill_file: Any,
) -> None:
    _die_with(parent, parents_end)
    part: dict[str, Any] | None = None
    try:
        # rows go into the file the parent opened before the fork, so it can read them
        part = _export(_scan(path, end, w, workers, root, spill_file))
    except BaseException:  # noqa: BLE001 - the parent falls back and reports, never the child
        part = None
    try:
        conn.send(part)
    finally:
        conn.close()


def _merge(mine: _Shard, part: dict[str, Any], spill_file: Any) -> None:
    """Fold a child's part into the parent's accumulator and spill (later record wins)."""
    acc, keys, spill = mine.acc, mine.keys, mine.spill
    slots = part["slots"]
    if not slots:
        return
    assert acc is not None and keys is not None and spill is not None
    theirs, codes, offsets, lengths = part["keys"], part["codes"], part["offsets"], part["lengths"]
    cols = [(acc.telemetry[name], part["t_" + name]) for name in TELEMETRY_FIELDS]
    source = bytearray(len(keys))
    spill.sources.append(spill_file)
    spill.source = source
    mine_codes, mine_off, mine_len = acc.codes, spill.offsets, spill.lengths
    for i, s in enumerate(slots):
        if theirs[i] <= keys[s]:
            continue
        keys[s] = theirs[i]
        mine_codes[s] = codes[i]
        mine_off[s] = offsets[i]
        mine_len[s] = lengths[i]
        source[s] = 1
        for col, other in cols:
            col[s] = other[i]
    acc.records += part["records"]


def sharded_pass(log_path: Path, root: Path, workers: int = 2) -> LogPass | None:
    """The log pass on two processes (this one and a forked child), or None when anything
    is unsound or unavailable (the caller then runs the one-process pass)."""
    if workers != 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    try:
        end, torn = _valid_end(log_path)
    except OSError:
        return None
    if end == 0:
        return None
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    spill_file = tempfile.TemporaryFile(dir=root, prefix=".results-", suffix=".spill")  # noqa: SIM115
    proc = ctx.Process(
        target=_child,
        args=(send, recv, os.getpid(), log_path, end, 1, 2, root, spill_file),
        daemon=True,
    )
    mine: _Shard | None = None
    keep = False
    try:
        proc.start()
        send.close()
        try:
            mine = _scan(log_path, end, 0, 2, root)
        except Exception:  # noqa: BLE001 - the one-process pass reports it
            return None
        try:
            part = recv.recv()
        except (EOFError, OSError):
            return None
        if part is None or part["count"] != mine.count or part["last_hash"] != mine.last_hash:
            return None
        if mine.acc is None and part["slots"]:
            return None  # cannot happen for one log; never guess
        _merge(mine, part, spill_file)
        keep = True
    finally:
        recv.close()
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        if not keep:
            spill_file.close()
            if mine is not None and mine.spill is not None:
                mine.spill.close()
    if mine.spill is None:
        spill_file.close()
    if torn:
        warn_torn_tail(log_path, mine.count + 1, torn)
    return LogPass(
        facts=mine.facts,
        acc=mine.acc,
        spill=mine.spill,
        count=mine.count,
        last_hash=mine.last_hash.decode("ascii"),
        torn_tail=bool(torn),
        episodes=mine.episodes + part["episodes"],
    )
