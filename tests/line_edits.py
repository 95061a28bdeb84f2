"""Test helpers shared by several test modules (moved from test_rescore.py)."""

from __future__ import annotations

import hashlib

import orjson

_GENESIS = b"0" * 64


def _rechain(lines: list[bytes]) -> list[bytes]:
    """The lines renumbered and their hashes recomputed, as the writer would have written
    them: body = the envelope up to its ``,"h":"`` suffix, h = sha256(prev + "\\n" + body)."""
    out: list[bytes] = []
    prev = _GENESIS
    for seq, line in enumerate(lines):
        ev = orjson.loads(line)
        envelope = {k: ev[k] for k in ("v", "seq", "type", "ts", "ep", "data")}
        envelope["seq"] = seq
        body = orjson.dumps(envelope)[:-1]
        prev = hashlib.sha256(prev + b"\n" + body).hexdigest().encode()
        out.append(body + b',"h":"' + prev + b'"}')
    return out
