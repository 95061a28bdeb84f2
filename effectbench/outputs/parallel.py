"""A sharded log pass for large rescores: W workers, each checks and folds one contiguous
part of the log.

Every line stores its own hash, so the link into line N can be checked from line N-1's
stored hash alone: ``sha256(h[N-1] + "\\n" + body[N]) == h[N]``. Worker ``k`` of ``W``
therefore reads only its part (split at line starts near ``k/W`` of the file), checks
each of its lines with the one line check (``effectbench.log.lines``) and its link, and
folds the episodes whose live attempt starts there. Line 1 (run.started, the plan) is
read by every worker.

Episodes in flight at a split point are handed over, never guessed: the worker whose
part an attempt started in keeps reading past its end, only that episode's lines, up to
its first terminal event (or the end of the log); the next parts skip an event of an
episode they have no live attempt for (unless it is an ``episode.planned``, which starts
one). The parent then checks that what each part skipped is exactly what the earlier
parts took over, seq for seq; a re-planned episode across a split, a stray event after
a terminal, or any other doubt makes the pass give up. The parts' slot-based metrics
accumulators merge by the Projector's order key ("the later record of an episode wins"),
and their result rows, spilled to one file per worker, are copied out in plan order.

The workers die with the rescore that forked them (SIGKILL, SIGTERM, anything): each
holds no end of the pipes but its own, asks Linux for SIGKILL when its parent dies, and
writes to /dev/null rather than the caller's stdout and stderr, so a killed rescore
never leaves a process behind that keeps a caller's stderr pipe open.

Nothing here reports problems. Any failure in any worker (a bad line, a broken link, a
protocol violation, a crashed process) makes ``sharded_pass`` return None, and the
caller runs the one-process pass, which raises exactly the error it always raised. So
the sharded pass only ever changes how fast a sound log is scored, never what a broken
one says.
"""

from __future__ import annotations

import itertools
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

from effectbench.core.events import ArmScreenshot, EpisodePlanned, RunStarted
from effectbench.log.lines import CHUNK, GENESIS_HASH, check_line, event_of, links, read_line
from effectbench.log.reader import warn_torn_tail
from effectbench.outputs.logpass import LogPass, RunFacts, Spill
from effectbench.outputs.rows import LINE_OPTS, record_row
from effectbench.projections.metrics import TELEMETRY_FIELDS, MetricsAccumulator

__all__ = ["MIN_PARALLEL_BYTES", "cpu_count", "sharded_pass", "split_points", "worker_count"]

MIN_PARALLEL_BYTES: Final = 8 << 20
"""Below ~25,000 events the fork, the pipes and the merge cost more than a core saves."""

_PR_SET_PDEATHSIG: Final = 1
_EP_KEY: Final = b',"ep":"'
_DATA_KEY: Final = b'","data":'


class _Unsound(Exception):
    """Something a worker will not decide; the one-process pass will."""


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_count(log_path: Path, requested: int | None = None) -> int:
    """How many processes fold ``log_path``: ``requested`` (``--workers``; 1 without
    fork), or by default every usable core for a log of 8 MB or more, and 1 below or for
    a caller running other threads (a lock another thread holds would stay locked in the
    child; a caller that asks for workers has said it holds none that matter)."""
    if requested is not None:
        return requested if "fork" in multiprocessing.get_all_start_methods() else 1
    if threading.active_count() != 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    try:
        size = log_path.stat().st_size
    except OSError:
        return 1
    return 1 if size < MIN_PARALLEL_BYTES else cpu_count()


def _valid_end(fd: int) -> tuple[int, int]:
    """(bytes up to and including the last newline, bytes after it: a torn tail)."""
    size = os.fstat(fd).st_size
    pos = size
    while pos > 0:
        step = min(1 << 16, pos)
        pos -= step
        i = os.pread(fd, step, pos).rfind(b"\n")
        if i >= 0:
            return pos + i + 1, size - pos - i - 1
    return 0, size


def _next_line(fd: int, pos: int, end: int) -> int:
    """Offset of the first line that starts at or after ``pos`` (``end`` if none)."""
    if pos <= 0:
        return 0
    pos -= 1
    while pos < end:
        block = os.pread(fd, min(1 << 16, end - pos), pos)
        if not block:
            return end
        i = block.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(block)
    return end


def split_points(fd: int, end: int, workers: int) -> list[int]:
    """Start offsets of the parts (the first is 0), at line starts near ``k * end / W``;
    fewer than ``workers`` when the log has too few lines."""
    starts = [0]
    for k in range(1, workers):
        s = _next_line(fd, k * end // workers, end)
        if starts[-1] < s < end:
            starts.append(s)
    return starts


def _line_at(fd: int, pos: int, stop: int) -> bytes:
    """The complete line that starts at ``pos`` (without its newline)."""
    buf = b""
    while b"\n" not in buf:
        if pos + len(buf) >= stop:
            raise _Unsound("no complete line there")
        block = os.pread(fd, 1 << 16, pos + len(buf))
        if not block:
            raise _Unsound("the log shrank while it was read")
        buf += block
    return buf[: buf.index(b"\n")]


def _hash_before(fd: int, start: int) -> bytes:
    """The stored hash of the line that ends at ``start``."""
    tail = os.pread(fd, 73, start - 73)
    if len(tail) != 73 or tail[:6] != b',"h":"' or tail[-3:] != b'"}\n':
        raise _Unsound("the line before the part has no hash suffix")
    return tail[6:70]


@attrs.define
class _Part:
    """One worker's result: its accumulator, the order key per slot, its spill, how its
    part of the chain starts and ends, and the hand-over of episodes across the splits."""

    facts: RunFacts
    acc: MetricsAccumulator | None = None
    keys: array[int] | None = None
    spill: Spill | None = None
    first_seq: int = 0
    prev_hash: bytes = b""
    count: int = 0
    last_hash: bytes = b""
    episodes: int = 0
    skipped: dict[str, list[int]] = attrs.field(factory=dict)
    """Events of episodes with no live attempt here (taken over by an earlier part)."""
    taken: dict[str, list[int]] = attrs.field(factory=dict)
    """Events read past the part's end for the attempts live there."""

    def add(self, rec: Any, key: int, root: Path, spill_file: Any) -> None:
        acc = self.acc
        if acc is None:
            acc = self.acc = MetricsAccumulator(self.facts.plan_facts().index)
            self.keys = array("q", [-1]) * len(acc.plan)
            self.spill = Spill(root, len(acc.plan), spill_file)
        assert self.keys is not None and self.spill is not None
        slot = acc.add(rec)
        self.keys[slot] = key
        self.spill.put(slot, orjson.dumps(record_row(rec), option=LINE_OPTS))
        self.episodes += 1


def _lines(fd: int, start: int, stop: int) -> Any:
    """The complete lines of ``[start, stop)``, chunk by chunk (``stop`` is a line end)."""
    pos = start
    tail = b""
    while pos < stop:
        chunk = os.pread(fd, min(CHUNK, stop - pos), pos)
        if not chunk:
            raise _Unsound("the log shrank while it was read")
        pos += len(chunk)
        lines = (tail + chunk).split(b"\n") if tail else chunk.split(b"\n")
        tail = lines.pop()
        yield lines
    if tail:
        raise _Unsound("a line crosses the end of the part")


def _scan(path: Path, start: int, stop: int, end: int, root: Path, spill_file: Any = None) -> _Part:
    """One worker's pass over ``[start, stop)`` and its hand-over; raises on anything unsound."""
    from effectbench.projections.episodes import FOLDED, Projector

    facts = RunFacts()
    part = _Part(facts)
    proj = Projector()
    feed, live = proj.feed, proj.live
    skipped = part.skipped
    planned = EpisodePlanned.TYPE
    shot = ArmScreenshot.TYPE
    folded = FOLDED
    fd = os.open(path, os.O_RDONLY)
    try:
        prev = GENESIS_HASH.encode()
        n = 0
        if start > 0:
            head = _line_at(fd, 0, end)
            ev0 = read_line(head, 0)
            if ev0.type != RunStarted.TYPE or not links(prev, head):
                raise _Unsound("line 1 is not a sound run.started")
            facts.see(ev0)  # the plan; resumes and the end come from the part itself
            feed(ev0)  # run.started names the scoring version the episodes are judged under
            prev = _hash_before(fd, start)
            n = orjson.loads(_line_at(fd, start, stop))["seq"]
            if type(n) is not int:
                raise _Unsound("no seq on the part's first line")
        part.first_seq, part.prev_hash = n, prev
        # the line check and its link in one call; an event object only for what is kept
        for lines in _lines(fd, start, stop):
            for line in lines:
                obj = check_line(line, n, prev)
                if obj is None:
                    raise _Unsound(f"line {n + 1}")
                prev = line[-66:-2]
                ep = obj["ep"]
                if ep is None:
                    event = read_line(line, n)  # a run-level event: a few per log
                    facts.see(event)
                    feed(event)  # run.started names the scoring version
                elif facts.started is None:
                    facts.too_early(read_line(line, n))
                elif obj["type"] == shot:  # each line lies in one part: cited exactly once
                    facts.cite(n, obj["data"])
                elif not live(ep):
                    if obj["type"] != planned:
                        skipped.setdefault(ep, []).append(n)
                    else:
                        feed(event_of(obj, n))
                elif obj["type"] in folded:  # else its episode is live: nothing of it is kept
                    rec = feed(event_of(obj, n))
                    if rec is not None:
                        part.add(rec, n, root, spill_file)
                n += 1
        part.count, part.last_hash = n, prev
        if stop < end:
            _take_over(fd, proj, part, stop, end, root, spill_file)
        for key, rec in proj.drain():
            part.add(rec, key, root, spill_file)
        facts.plan_facts()  # a log without its plan is the one-process pass's to report
    except BaseException:
        if part.spill is not None:
            part.spill.close()
        raise
    finally:
        os.close(fd)
    return part


def _take_over(
    fd: int, proj: Any, part: _Part, stop: int, end: int, root: Path, spill_file: Any
) -> None:
    """Read on past the part's end for the attempts still live at it, each up to its first
    terminal event; their lines are checked by the parts they lie in."""
    from effectbench.projections.episodes import FOLDED

    wanted = {orjson.dumps(ep)[1:-1]: ep for ep in proj.in_flight()}
    if not wanted:
        return
    taken = part.taken
    feed = proj.feed
    loads = orjson.loads
    for lines in _lines(fd, stop, end):
        for line in lines:
            i = line.find(_EP_KEY)
            if i < 0:
                continue
            j = line.find(_DATA_KEY, i)
            ep = wanted.get(line[i + 7 : j]) if j >= 0 else None
            if ep is None:
                continue
            obj = loads(line)
            if obj["ep"] != ep:
                continue
            t = obj["type"]
            if t == EpisodePlanned.TYPE:
                raise _Unsound(f"episode {ep} is planned again across a split")
            taken.setdefault(ep, []).append(obj["seq"])
            if t not in FOLDED:
                continue
            event = read_line(line, obj["seq"])
            rec = feed(event)
            if rec is not None:
                part.add(rec, event.seq, root, spill_file)
                del wanted[line[i + 7 : j]]
                if not wanted:
                    return


def _export(part: _Part) -> dict[str, Any]:
    """A child's part: its filled slots with their key, code, telemetry and row position,
    its piece of the chain, its run-level events and its hand-over."""
    acc, keys, spill = part.acc, part.keys, part.spill
    out: dict[str, Any] = {
        "first_seq": part.first_seq,
        "prev_hash": part.prev_hash,
        "count": part.count,
        "last_hash": part.last_hash,
        "episodes": part.episodes,
        "skipped": part.skipped,
        "taken": part.taken,
        "resumes": part.facts.resumes,
        "finished": part.facts.finished,
        "finished_seq": part.facts.finished_seq,
        "cited": list(part.facts.cited.items()),
        "records": 0,
        "slots": array("q"),
    }
    if acc is None or keys is None or spill is None:
        return out
    spill.file.flush()
    slots = array("q", (s for s, k in enumerate(keys) if k >= 0))
    out.update(
        records=acc.records,
        slots=slots,
        keys=array("q", (keys[s] for s in slots)),
        codes=bytes(acc.codes[s] for s in slots),
        offsets=array("q", (spill.offsets[s] for s in slots)),
        lengths=array("q", (spill.lengths[s] for s in slots)),
    )
    for name in TELEMETRY_FIELDS:
        col = acc.telemetry[name]
        out["t_" + name] = array("d", (col[s] for s in slots))
    out["call_latency"] = dict(acc.call_latency)
    return out


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


def _die_with(parent: int, parents_ends: list[Any]) -> None:
    """Tie the forked worker's life to ``parent``'s.

    The parent's ends of the pipes are closed first: held here, one would keep a pipe
    readable after the parent died, and a send larger than the pipe's buffer would then
    block for ever. The death signal covers a parent killed while the worker scans (the
    check after it, a parent that died before it was asked for). stdout and stderr go
    to /dev/null, so a caller reading the rescore's stderr is never kept waiting by it.
    """
    for end in parents_ends:
        end.close()
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
    parents_ends: list[Any],
    parent: int,
    path: Path,
    span: tuple[int, int, int],
    root: Path,
    spill_file: Any,
) -> None:
    _die_with(parent, parents_ends)
    out: dict[str, Any] | None = None
    try:
        # rows go into the file the parent opened before the fork, so it can read them
        out = _export(_scan(path, *span, root, spill_file))
    except BaseException:  # noqa: BLE001 - the parent falls back and reports, never the child
        out = None
    try:
        conn.send(out)
    finally:
        conn.close()


def _handed_over(parts: list[dict[str, Any]]) -> bool:
    """Every event a part skipped was taken over by an earlier part, and nothing else."""
    taken: dict[str, list[int]] = {}
    for p in parts:
        for ep, seqs in p["taken"].items():
            if ep in taken:
                return False
            taken[ep] = seqs
    skipped: dict[str, list[int]] = {}
    for p in parts:
        for ep, seqs in p["skipped"].items():
            skipped.setdefault(ep, []).extend(seqs)
    return taken == skipped


def _chained(parts: list[dict[str, Any]]) -> bool:
    """Each part starts where the one before ended: seq and hash."""
    return all(
        b["first_seq"] == a["count"] and b["prev_hash"] == a["last_hash"]
        for a, b in itertools.pairwise(parts)
    )


def _merge(mine: _Part, part: dict[str, Any], spill_file: Any, root: Path) -> None:
    """Fold a child's part into the parent's accumulator and spill (later record wins)."""
    facts = mine.facts
    facts.resumes.extend(part["resumes"])
    for key, seq in part["cited"]:
        facts.cited.setdefault(tuple(key), seq)
    if part["finished"] is not None:
        facts.finished, facts.finished_seq = part["finished"], part["finished_seq"]
    mine.episodes += part["episodes"]
    slots = part["slots"]
    if not slots:
        return
    if mine.acc is None:
        mine.acc = MetricsAccumulator(facts.plan_facts().index)
        mine.keys = array("q", [-1]) * len(mine.acc.plan)
        mine.spill = Spill(root, len(mine.acc.plan))
    acc, keys, spill = mine.acc, mine.keys, mine.spill
    assert keys is not None and spill is not None
    theirs, codes, offsets, lengths = part["keys"], part["codes"], part["offsets"], part["lengths"]
    cols = [(acc.telemetry[name], part["t_" + name]) for name in TELEMETRY_FIELDS]
    calls: dict[int, tuple[float, ...]] = part.get("call_latency") or {}
    if spill.source is None:
        spill.source = bytearray(len(keys))
    spill.sources.append(spill_file)
    source, index = spill.source, len(spill.sources) - 1
    mine_codes, mine_off, mine_len = acc.codes, spill.offsets, spill.lengths
    for i, s in enumerate(slots):
        if theirs[i] <= keys[s]:
            continue
        keys[s] = theirs[i]
        mine_codes[s] = codes[i]
        mine_off[s] = offsets[i]
        mine_len[s] = lengths[i]
        source[s] = index
        for col, other in cols:
            col[s] = other[i]
        lat = calls.get(s)
        if lat is not None:
            acc.call_latency[s] = lat
        else:
            acc.call_latency.pop(s, None)
    acc.records += part["records"]


def _chain_of(part: _Part) -> dict[str, Any]:
    return {
        "first_seq": part.first_seq,
        "prev_hash": part.prev_hash,
        "count": part.count,
        "last_hash": part.last_hash,
        "skipped": part.skipped,
        "taken": part.taken,
    }


_MAX_WORKERS: Final = 64
"""A merged spill names each row's file in one byte; far more than any machine here."""


def _spans(log_path: Path, workers: int) -> tuple[list[tuple[int, int, int]], int]:
    """(start, stop, valid end) of each part, and the torn tail's length."""
    fd = os.open(log_path, os.O_RDONLY)
    try:
        end, torn = _valid_end(fd)
        starts = split_points(fd, end, min(workers, _MAX_WORKERS)) if end else [0]
    finally:
        os.close(fd)
    stops = [*starts[1:], end]
    return [(a, b, end) for a, b in zip(starts, stops, strict=True)], torn


def sharded_pass(log_path: Path, root: Path, workers: int = 2) -> LogPass | None:
    """The log pass on ``workers`` processes (this one and forked children), or None when
    anything is unsound or unavailable (the caller then runs the one-process pass)."""
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    try:
        spans, torn = _spans(log_path, workers)
    except OSError:
        return None
    if len(spans) < 2:
        return None
    ctx = multiprocessing.get_context("fork")
    pipes = [ctx.Pipe(duplex=False) for _ in spans[1:]]
    files = [
        tempfile.TemporaryFile(dir=root, prefix=".results-", suffix=".spill")  # noqa: SIM115
        for _ in spans[1:]
    ]
    procs = []
    for k, ((_, send), span, file) in enumerate(zip(pipes, spans[1:], files, strict=True)):
        # a child keeps only its own end: every other end is closed in it at once
        others = [r for r, _ in pipes] + [s for i, (_, s) in enumerate(pipes) if i != k]
        args = (send, others, os.getpid(), log_path, span, root, file)
        procs.append(ctx.Process(target=_child, args=args, daemon=True))
    mine: _Part | None = None
    keep = False
    try:
        for proc in procs:
            proc.start()
        for _, send in pipes:
            send.close()
        try:
            mine = _scan(log_path, *spans[0], root)
        except Exception:  # noqa: BLE001 - the one-process pass reports it
            return None
        parts: list[dict[str, Any]] = []
        for recv, _ in pipes:
            try:
                part = recv.recv()
            except (EOFError, OSError):
                return None
            if part is None:
                return None
            parts.append(part)
        chain = [_chain_of(mine), *parts]
        if not _chained(chain) or not _handed_over(chain):
            return None
        for part, file in zip(parts, files, strict=True):
            _merge(mine, part, file, root)
        keep = True
    finally:
        for recv, _ in pipes:
            recv.close()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        used = set() if mine is None or mine.spill is None else set(map(id, mine.spill.sources))
        for file in files:
            if not keep or id(file) not in used:
                file.close()
        if not keep and mine is not None and mine.spill is not None:
            mine.spill.close()
    last = parts[-1]
    if torn:
        warn_torn_tail(log_path, last["count"] + 1, torn)
    return LogPass(
        facts=mine.facts,
        acc=mine.acc,
        spill=mine.spill,
        count=last["count"],
        last_hash=last["last_hash"].decode("ascii"),
        torn_tail=bool(torn),
        episodes=mine.episodes,
    )
