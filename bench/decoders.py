"""Decoding log lines: today's orjson path against msgspec's typed decoding.

The 1,000,000-event MockMed-shaped log of bench/rescore.py (built the same way, in a temp
dir) is read in 4 MB chunks and decoded four ways, without the hash chain: orjson.loads
per line with the envelope checks of effectbench.log.lines (what the rescore runs),
orjson.loads alone, msgspec's Decoder of a typed envelope struct over a whole chunk
(``decode_lines``), and per line. Whichever is faster is what the log reader should
use; best of --runs in CPU seconds, interleaved.

    .venv/bin/python bench/decoders.py [--events 1000000] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import orjson
from _common import load_line, loadavg, parser, table, write_json

from effectbench.log.lines import CHUNK, read_line
from effectbench.testing import biglog


class Envelope(msgspec.Struct, gc=False):
    """The line's envelope, typed: msgspec checks the field types in C."""

    v: int
    seq: int
    type: str
    ts: int | float
    ep: str | None
    data: dict[str, Any]
    h: str


def chunks(path: Path) -> Iterator[bytes]:
    """Whole lines, a few MB at a time."""
    tail = b""
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            block = tail + block
            cut = block.rfind(b"\n") + 1
            tail = block[cut:]
            yield block[:cut]


def today(path: Path) -> None:
    n = 0
    for chunk in chunks(path):
        for line in chunk.split(b"\n")[:-1]:
            read_line(line, n)
            n += 1


def orjson_only(path: Path) -> None:
    loads = orjson.loads
    for chunk in chunks(path):
        for line in chunk.split(b"\n")[:-1]:
            loads(line)


def msgspec_chunk(path: Path) -> None:
    decode = msgspec.json.Decoder(Envelope).decode_lines
    n = 0
    for chunk in chunks(path):
        for event in decode(chunk):
            if event.seq != n:
                raise SystemExit("seq")
            n += 1


def msgspec_line(path: Path) -> None:
    decode = msgspec.json.Decoder(Envelope).decode
    n = 0
    for chunk in chunks(path):
        for line in chunk.split(b"\n")[:-1]:
            if decode(line).seq != n:
                raise SystemExit("seq")
            n += 1


WAYS: dict[str, Callable[[Path], None]] = {
    "orjson + line check (effectbench.log.lines)": today,
    "orjson.loads alone": orjson_only,
    "msgspec typed, decode_lines per chunk": msgspec_chunk,
    "msgspec typed, per line": msgspec_line,
}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    args = ap.parse_args()
    start_load = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "template").mkdir()
        template = biglog.record_template(root / "template")
        count = biglog.make_log(root / "run", template, events=args.events)
        log = root / "run" / "events.jsonl"
        cpu: dict[str, list[float]] = {name: [] for name in WAYS}
        for _ in range(args.runs):
            for name, way in WAYS.items():
                t0 = time.process_time()
                way(log)
                cpu[name].append(time.process_time() - t0)
    print(f"decoding {count:,} log lines, best of {args.runs} CPU seconds ({load_line()})")
    rows = [[name, min(s), min(s) / count * 1e6] for name, s in cpu.items()]
    print(table(["decoder", "CPU s", "us per line"], rows))
    write_json(
        args.json,
        "decoders",
        {"events": count, "cpu_s": cpu, "best_cpu_s": {k: min(v) for k, v in cpu.items()}},
        start_load,
    )


if __name__ == "__main__":
    main()
