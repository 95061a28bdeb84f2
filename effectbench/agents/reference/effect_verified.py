#!/usr/bin/env python3
"""A reference agent in Python, run as a subprocess through the agent protocol.

Standard library only, so it runs under any Python 3.9+ (also the system one inside
the sandbox, which sees none of the harness's packages). It does what
effectbench.arms.baselines.EffectVerifiedArm does, over MockMed's HTTP API: read back,
submit the form once, read back again, and claim success only when the declared effect
(an insert clause or a state diff) holds in what the product reads back; on a
reference-mode diff, whose expected changes it cannot see, only when the change is its
own submission (effectbench/arms/own_change.py). The form and the readback are the
``form_url`` and ``readback_url`` channels when the product names them, else the MockMed
anchor's routes. One thread per episode; one process serves many episodes at once
(every message names its episode).
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


# ----------------------------------------------------------------------- the diff judge, ported
# The rules of effectbench/scoring/diff.py, reduced to the verdict's state.

MISSING = object()


def allowed_fields(diff: dict[str, Any], table: str) -> Any:
    """The fields of ``table`` the product may move; None when the whole table may."""
    fields = set()
    for entry in diff.get("allow") or ():
        t, _, f = entry.partition(".")
        if t == table:
            if f == "*":
                return None
            fields.add(f)
    return fields


def row_key(row: dict[str, Any], cols: list[str]) -> tuple[str, ...]:
    return tuple(key(row.get(c, MISSING)) for c in cols)


def content(row: dict[str, Any], skip: Any) -> tuple[str, ...]:
    return tuple(f"{c}={key(row[c])}" for c in sorted(row) if c not in skip)


def table_diff(before: list[Any], after: list[Any], cols: Any, skip: Any) -> dict[str, Any]:
    """New rows, gone rows and (keyed tables) rows changed in place."""
    if not cols:
        pool: dict[tuple[str, ...], list[Any]] = {}
        for r in before:
            pool.setdefault(content(r, skip), []).append(r)
        inserted = []
        for r in after:
            same_rows = pool.get(content(r, skip))
            if same_rows:
                same_rows.pop()
            else:
                inserted.append(r)
        gone = [r for rows in pool.values() for r in rows]
        return {"key": None, "inserted": inserted, "deleted": gone, "updated": []}
    old: dict[tuple[str, ...], list[Any]] = {}
    for r in before:
        old.setdefault(row_key(r, cols), []).append(r)
    inserted, updated = [], []
    for r in after:
        prior = old.get(row_key(r, cols))
        if not prior:
            inserted.append(r)
            continue
        b = prior.pop(0)
        fields = [
            f
            for f in sorted(set(b) | set(r))
            if f not in skip and not same(b.get(f, MISSING), r.get(f, MISSING))
        ]
        if fields:
            updated.append((b, r, fields))
    gone = [r for rows in old.values() for r in rows]
    return {"key": cols, "inserted": inserted, "deleted": gone, "updated": updated}


def observe(diff: dict[str, Any], pre: dict[str, Any], post: dict[str, Any]) -> dict[str, Any]:
    """The change from ``pre`` to ``post`` per table, minus what the allow-list lets move."""
    pre_t, post_t = pre.get("tables") or {}, post.get("tables") or {}
    keys = diff.get("keys") or {}
    out = {}
    for table in sorted(set(pre_t) | set(post_t)):
        skip = allowed_fields(diff, table)
        if skip is None:
            continue
        d = table_diff(pre_t.get(table, []), post_t.get(table, []), keys.get(table), skip)
        if d["inserted"] or d["deleted"] or d["updated"]:
            out[table] = d
    return out


class FixtureError(Exception):
    """The pre-state cannot hold the declared change."""


def pre_row(diff: dict[str, Any], pre: dict[str, Any], table: str, want: Any) -> Any:
    cols = (diff.get("keys") or {}).get(table) or sorted(want)
    for r in (pre.get("tables") or {}).get(table, []):
        if row_key(r, cols) == row_key(want, cols):
            return r
    raise FixtureError(table)


def fate(d: Any, row: Any, used: set[int]) -> Any:
    """How ``row`` (a pre row) fared: ("same"|"updated"|"deleted", after, changed fields)."""
    for b, a, fields in () if d is None else d["updated"]:
        if b is row:
            used.add(id(b))
            return "updated", a, fields
    for r in () if d is None else d["deleted"]:
        if r is row and id(r) not in used:
            used.add(id(r))
            return "deleted", None, []
    return "same", row, []


def mismatches(diff: dict[str, Any], pre: dict[str, Any], seen: dict[str, Any]) -> int:
    """How many expected changes the observed diff misses, plus how many observed changes
    no expected change accounts for (FixtureError: the task's fixture disagrees)."""
    used: set[int] = set()
    bad = 0
    for c in diff.get("changes") or ():
        if "insert" in c:
            found = 0
            for r in seen.get(c["insert"], {}).get("inserted", []):
                if found == c.get("count", 1):
                    break
                if id(r) not in used and matches(r, c["fields"]):
                    used.add(id(r))
                    found += 1
            bad += found < c.get("count", 1)
            continue
        table = c.get("update", c.get("delete"))
        before = pre_row(diff, pre, table, c["key"])
        if "update" in c and not matches(before, c.get("before") or {}):
            raise FixtureError(table)
        how, after, changed = fate(seen.get(table), before, used)
        if "delete" in c:
            bad += how != "deleted"
        elif how != "updated":
            bad += 1
        else:
            bad += not matches(after, c["after"]) or any(f not in c["after"] for f in changed)
    for d in seen.values():
        bad += sum(id(r) not in used for r in d["inserted"] + d["deleted"])
        bad += sum(id(b) not in used for b, _, _ in d["updated"])
    return bad


def judge_diff(diff: dict[str, Any], pre: dict[str, Any], post: dict[str, Any]) -> str:
    if not post.get("readable") or not pre.get("readable"):
        return "UNREADABLE"
    seen = observe(diff, pre, post)
    if not seen:
        return "ABSENT"
    try:
        return "WRONG_PERSISTED" if mismatches(diff, pre, seen) else "CORRECT"
    except FixtureError:
        return "UNREADABLE"


# ----------------------------------------------------------------------- a reference-mode diff
# effectbench/arms/own_change.py, ported: the expected diff is the twin's, which this agent
# never sees; confirm only that the change is its own submission.


def form_value(v: Any) -> str:
    return "" if v is None else str(v)


def named(row: dict[str, Any], cols: Any, sent: set[str]) -> bool:
    if cols:
        return all(form_value(row.get(c)) in sent for c in cols)
    return any(form_value(v) in sent for v in row.values())


def change_values(seen: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for d in seen.values():
        for r in d["inserted"] + d["deleted"]:
            out |= {form_value(v) for v in r.values()}
        for b, a, fields in d["updated"]:
            out |= {form_value(b.get(c)) for c in d["key"] or ()}
            out |= {form_value(a.get(f)) for f in fields}
    return out


def own_change(task: dict[str, Any], pre: dict[str, Any], post: dict[str, Any]) -> Any:
    """(confirmed, why), as effectbench.arms.own_change.own_change."""
    diff, solution = task["effect"]["diff"], task.get("solution") or {}
    if not pre.get("readable") or not post.get("readable"):
        bad = pre if not pre.get("readable") else post
        return False, f"the readback is unreadable: {bad.get('error') or 'no error given'}"
    sent = {form_value(v) for v in solution.values()} - {""}
    landed: set[str] = set()
    problems = []
    seen = observe(diff, pre, post)
    for table, d in seen.items():
        for r in d["inserted"]:
            values = {form_value(v) for c, v in r.items() if c not in (d["key"] or ())}
            landed |= values
            if not values & sent:
                problems.append(f"a new row in {table!r} holds nothing it submitted")
        for b, a, fields in d["updated"]:
            landed |= {form_value(a.get(f)) for f in fields}
            if not named(b, d["key"], sent):
                problems.append(f"a row of {table!r} it did not name changed")
            stray = [f for f in fields if form_value(a.get(f)) not in sent]
            if stray:
                problems.append(f"{table!r} fields it did not set changed: {', '.join(stray)}")
        for r in d["deleted"]:
            if not named(r, d["key"], sent):
                problems.append(f"a row of {table!r} it did not name is gone")
    if not seen:
        return False, "nothing changed in the readback"
    params = task.get("params") or {}
    missing = sorted(k for k, v in params.items() if v not in landed)
    if missing:
        problems.append(f"the payload ({', '.join(missing)}) is in no changed row")
    everything = change_values(observe(dict(diff, allow=[]), pre, post))
    unsaved = sorted(
        k for k, v in solution.items() if form_value(v) and form_value(v) not in everything
    )
    if unsaved:
        problems.append(f"what it submitted as {', '.join(unsaved)} is in no change")
    if problems:
        return False, "; ".join(problems)
    count = sum(len(d["inserted"]) + len(d["deleted"]) + len(d["updated"]) for d in seen.values())
    return True, f"{count} change(s), each accounted for by its own submission"


# ----------------------------------------------------------------------- the product, over HTTP


def readback(url: str) -> dict[str, Any]:
    """The product's JSON readback: an object of table -> rows."""
    try:
        with _http.open(url, timeout=30) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        return {"readable": False, "error": f"readback answered HTTP {exc.code}"}
    except OSError as exc:
        return {"readable": False, "error": f"readback request failed: {exc}"}
    try:
        tables = {t: rows for t, rows in json.loads(body).items() if isinstance(rows, list)}
        return {"readable": True, "tables": tables}
    except (ValueError, AttributeError) as exc:
        return {"readable": False, "error": f"readback body is not the expected JSON: {exc}"}


def submit(episode_id: str, url: str, solution: dict[str, Any]) -> None:
    form = {k: "" if v is None else str(v) for k, v in solution.items()}
    data = urllib.parse.urlencode(form).encode()
    try:
        with _http.open(url, data=data, timeout=30) as resp:
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


def routes(channels: dict[str, Any]) -> Any:
    """(form URL, readback URL): the product's own channels, else the MockMed anchor's."""
    base = channels.get("base_url")
    if not base:
        return None
    form = channels.get("form_url") or base + "encounters"
    return form, channels.get("readback_url") or base + "api/encounters"


def verified(task: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> Any:
    """(claim success, message) from the two reads."""
    effect = task["effect"]
    if "diff" not in effect:
        state = judge(effect, before, after)
    elif effect["diff"].get("mode") == "reference":
        ok, why = own_change(task, before, after)
        if ok:
            return True, (
                f"the product readback shows the submission landed ({why}); the expected "
                "diff is the reference program's, which the task view does not give"
            )
        return False, f"the product readback does not show the submission landing as asked: {why}"
    else:
        state = judge_diff(effect["diff"], before, after)
    if state == "CORRECT":
        return True, "the product readback confirms the declared effect"
    return False, f"the product readback does not confirm the effect ({state})"


def episode(msg: dict[str, Any]) -> None:
    ep, task = msg["episode_id"], msg["task"]
    urls = routes(msg.get("channels") or {})
    if not task.get("solution") or not urls:
        return report(ep, False, NO_SCRIPT)
    form, read = urls
    if not task.get("effect"):
        submit(ep, form, task["solution"])
        return report(ep, False, "acted but cannot verify: the task declares no effect to check")
    before = readback(read)
    submit(ep, form, task["solution"])
    return report(ep, *verified(task, before, readback(read)))


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
