#!/usr/bin/env python3
"""A reference agent in Python, run as a subprocess through the agent protocol.

Standard library only, so it runs under any Python 3.9+ (also the system one inside
the sandbox, which sees none of the harness's packages). It does what
effectbench.arms.baselines.EffectVerifiedArm does, over MockMed's HTTP API: read back,
submit the form once, read back again, and claim success only when the declared effect
holds in what the product reads back. One thread per episode; one process serves many
episodes at once (every message names its episode).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from typing import Any

NO_SCRIPT = "no scripted action: the task offers no solution or the provider no driver"
BANNER = re.compile(r"<div id='banner' class='(saved|error)'>([^<]*)</div>")
_out = threading.Lock()
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def send(message: dict[str, Any]) -> None:
    line = json.dumps(message, separators=(",", ":")) + "\n"
    with _out:
        sys.stdout.write(line)
        sys.stdout.flush()


# ----------------------------------------------------------------------- the judge, ported
# The rules of effectbench/judge.py, reduced to the verdict's state.


def same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def matches(row: dict[str, Any], selector: dict[str, Any]) -> bool:
    return all(col in row and same(row[col], want) for col, want in selector.items())


def key(value: Any) -> str:
    return f"{type(value).__name__}:{value!r}"


def whole(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(f"{c}={key(row[c])}" for c in sorted(row))


def identity(row: dict[str, Any], id_field: str) -> tuple[str, ...]:
    return ("id", key(row[id_field])) if id_field in row else ("row", *whole(row))


def unpaired(rows: list[Any], others: list[Any], selector: Any, id_field: str) -> int:
    """How many rows outside the selector have no equal counterpart among ``others``."""
    pool: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for r in others:
        pool.setdefault(identity(r, id_field), []).append(whole(r))
    bad = 0
    for r in rows:
        if selector is not None and matches(r, selector):
            continue
        candidates = pool.get(identity(r, id_field))
        if not candidates:
            bad += 1
        elif whole(r) in candidates:
            candidates.remove(whole(r))
        else:
            candidates.pop()
            bad += 1
    return bad


def judge(effect: dict[str, Any], pre: dict[str, Any], post: dict[str, Any]) -> str:
    rw = effect["record_written"]
    id_field = rw.get("id_field", "id")
    if not post.get("readable"):
        return "UNREADABLE"
    needs_pre = (
        rw.get("count_new_only")
        or rw.get("forbid_collateral_loss")
        or rw.get("forbid_stray_writes")
    )
    if not pre.get("readable") and needs_pre:
        return "UNREADABLE"
    pre_t, post_t = pre.get("tables") or {}, post.get("tables") or {}
    rows = [r for r in post_t.get(rw["table"], []) if matches(r, rw["selector"])]
    if rw.get("count_new_only"):
        seen = Counter(identity(r, id_field) for r in pre_t.get(rw["table"], []))
        fresh = []
        for r in rows:
            if seen[identity(r, id_field)]:
                seen[identity(r, id_field)] -= 1
            else:
                fresh.append(r)
        rows = fresh
    side = 0
    for table, before in pre_t.items() if rw.get("forbid_collateral_loss") else ():
        sel = rw["selector"] if table == rw["table"] else None
        side += unpaired(before, post_t.get(table, []), sel, id_field) if before else 0
    for table, after in post_t.items() if rw.get("forbid_stray_writes") else ():
        sel = rw["selector"] if table == rw["table"] else None
        side += unpaired(after, pre_t.get(table, []), sel, id_field)
    if not rows and not side:
        return "ABSENT"
    content = 0
    if rows and rw.get("idempotency_key"):
        col, want = rw["idempotency_key"]
        content += sum(1 for r in rows if not (col in r and same(r[col], want)))
    for fe in effect.get("field_equals") or () if rows else ():
        content += sum(
            1 for r in rows if not (fe["field"] in r and same(r[fe["field"]], fe["expected"]))
        )
    if side or content or len(rows) != rw.get("expected_count", 1):
        return "WRONG_PERSISTED"
    return "CORRECT"


# ----------------------------------------------------------------------- the product, over HTTP


def readback(base: str) -> dict[str, Any]:
    try:
        with _http.open(base + "api/encounters", timeout=30) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        return {"readable": False, "error": f"readback answered HTTP {exc.code}"}
    except OSError as exc:
        return {"readable": False, "error": f"readback request failed: {exc}"}
    try:
        return {"readable": True, "tables": {"encounters": json.loads(body)["encounters"]}}
    except (ValueError, KeyError, TypeError) as exc:
        return {"readable": False, "error": f"readback body is not the expected JSON: {exc}"}


def submit(episode_id: str, base: str, solution: dict[str, Any]) -> None:
    form = {k: "" if v is None else str(v) for k, v in solution.items()}
    data = urllib.parse.urlencode(form).encode()
    try:
        with _http.open(base + "encounters", data=data, timeout=30) as resp:
            status, page = resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        status, page = exc.code, exc.read().decode("utf-8", "replace")
    m = BANNER.search(page)
    saved = m is not None and m.group(1) == "saved"
    detail = {"status": status, "screen_says_saved": saved}
    send({"type": "action", "episode_id": episode_id, "kind": "submit_form", "detail": detail})


def report(episode_id: str, success: bool, message: str) -> None:
    send({"type": "report", "episode_id": episode_id, "reported_success": success,
          "halted": not success, "message": message})  # fmt: skip


def episode(msg: dict[str, Any]) -> None:
    ep, task = msg["episode_id"], msg["task"]
    base = (msg.get("channels") or {}).get("base_url")
    if not task.get("solution") or not base:
        return report(ep, False, NO_SCRIPT)
    if not task.get("effect"):
        submit(ep, base, task["solution"])
        return report(ep, False, "acted but cannot verify: the task declares no effect to check")
    before = readback(base)
    submit(ep, base, task["solution"])
    state = judge(task["effect"], before, readback(base))
    if state == "CORRECT":
        return report(ep, True, "the product readback confirms the declared effect")
    return report(ep, False, f"the product readback does not confirm the effect ({state})")


def guarded(msg: dict[str, Any]) -> None:
    try:
        episode(msg)
    except Exception as exc:  # noqa: BLE001 - told to the harness, which fails the episode
        send(
            {
                "type": "error",
                "episode_id": msg.get("episode_id"),
                "message": f"{type(exc).__name__}: {exc}",
            }
        )


def main() -> None:
    threads: list[threading.Thread] = []
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if msg.get("type") == "episode":
            thread = threading.Thread(target=guarded, args=(msg,), daemon=True)
            thread.start()
            threads = [t for t in threads if t.is_alive()] + [thread]
        # "cancel": each request is bounded by its timeout; nothing to interrupt here
    for thread in threads:  # end of input: the run is over; finish what is running
        thread.join()


if __name__ == "__main__":
    main()
