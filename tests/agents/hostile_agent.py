"""A hostile protocol agent: it acts through the product, then tries everything the
in-process probe of issue 13 did and more, and reports what it managed.

Usage: hostile_agent.py HARNESS_PID HOST_PATH...  (host paths it is told about: the
provider's episode directory, the run directory). Trial 0 of every task probes and
reports its findings as JSON in the report's message; trial 1 floods stdout instead.
Standard library only (it runs under the system Python inside the sandbox).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import re
import sqlite3
import sys
import urllib.parse
import urllib.request
from typing import Any

TOKEN = re.compile(r"/e/([A-Za-z0-9_-]{20,})/")
PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
SEARCH_DIRS = ("/dev/shm", "/tmp", "/run", "/var/tmp")
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def walk_files(roots: list[str], limit: int = 2000) -> list[str]:
    found: list[str] = []
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            found += [os.path.join(dirpath, f) for f in files]
            if len(found) > limit:
                return found
    return found


def episode_files(paths: list[str]) -> tuple[list[str], list[str]]:
    """(episode databases it could open, host directories it could list)."""
    opened, listed = [], []
    for p in paths:
        try:
            os.listdir(p)
            listed.append(p)
        except OSError:
            pass
    candidates = walk_files([*paths, *SEARCH_DIRS])
    candidates += glob.glob("/proc/*/fd/*") + glob.glob("/proc/*/cwd/*")
    for path in candidates:
        try:
            target = os.path.realpath(path)  # an fd of another process: the file it holds open
        except OSError:
            continue
        if not re.search(r"\.db(-wal|-shm)?$", target) or not os.path.isfile(target):
            continue  # (never a pipe or socket: opening one could block)
        try:
            with open(path, "rb") as f:
                f.read(16)
        except OSError:
            continue
        if path.endswith(".db"):
            try:
                sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("select 1").fetchall()
            except sqlite3.Error:
                pass
        opened.append(path)
    return opened, listed


def harness_memory(pid: int, budget: int = 256 << 20) -> str:
    """The harness's writable memory, read through /proc (where it can see the harness)."""
    chunks: list[bytes] = []
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                start, end = (int(x, 16) for x in addr.split("-"))
                if not perms.startswith("rw") or end - start > budget:
                    continue
                try:
                    mem.seek(start)
                    chunks.append(mem.read(end - start))
                except (OSError, ValueError, OverflowError):
                    continue
                budget -= end - start
                if budget <= 0:
                    break
    except OSError:
        return ""
    return b"".join(chunks).decode("latin-1")


def other_tokens(own: str, base: str, paths: list[str], pid: int) -> tuple[list[str], bool]:
    """Tokens of other episodes found anywhere it can look, and whether it saw its own."""
    seen: set[str] = set()
    sources = glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ")
    sources += walk_files([*paths, *SEARCH_DIRS], limit=500)
    for path in sources:
        if not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as f:
                seen.update(TOKEN.findall(f.read(1 << 20).decode("latin-1")))
        except OSError:
            continue
    seen.update(TOKEN.findall(harness_memory(pid)))
    root = base.split("/e/")[0]
    for url in (root + "/", root + "/e/", base + "../"):
        try:
            with _http.open(url, timeout=5) as resp:
                seen.update(TOKEN.findall(resp.read().decode("latin-1")))
        except OSError:
            pass
    seen.update(TOKEN.findall(base))
    return sorted(seen - {own}), own in seen


def harness_reach(pid: int) -> dict[str, bool]:
    out = {"proc_visible": os.path.exists(f"/proc/{pid}")}
    try:
        os.kill(pid, 0)  # signal 0: checks permission and existence, delivers nothing
        out["signal"] = True
    except OSError:
        out["signal"] = False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    seized = libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0  # SEIZE does not stop the tracee
    if seized:
        libc.ptrace(PTRACE_DETACH, pid, None, None)
    out["ptrace"] = seized
    return out


def writes(name: str, paths: list[str]) -> tuple[list[str], bool]:
    """Places outside the scratch dir it could create a file in, and whether scratch works."""
    here = os.path.dirname(os.path.abspath(__file__))
    done = []
    for d in ("/", "/usr", "/etc", "/dev", "/dev/shm", "/var/tmp", "/proc", here, *paths):
        target = os.path.join(d, name)
        try:
            with open(target, "w") as f:
                f.write("hostile")
            done.append(target)
        except OSError:
            pass
    try:
        with open(os.path.join("/tmp", name), "w") as f:
            f.write("scratch")
        scratch = True
    except OSError:
        scratch = False
    return done, scratch


def submit(base: str, solution: dict[str, Any]) -> int:
    data = urllib.parse.urlencode({k: "" if v is None else str(v) for k, v in solution.items()})
    try:
        with _http.open(base + "encounters", data=data.encode(), timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def probe(msg: dict[str, Any], pid: int, paths: list[str]) -> dict[str, Any]:
    base = msg["channels"]["base_url"]
    own = TOKEN.findall(base)[0]
    status = submit(base, msg["task"]["solution"]) if msg["task"].get("solution") else None
    opened, listed = episode_files(paths)
    tokens, saw_own = other_tokens(own, base, paths, pid)
    written, scratch = writes(f"hostile-{os.getpid()}", paths)
    try:
        with open("/usr/bin/env", "rb") as f:
            control_read = bool(f.read(4))
    except OSError:
        control_read = False
    return {
        "submitted": status, "opened": opened, "listed": listed, "other_tokens": tokens,
        "saw_own_token": saw_own, "harness": harness_reach(pid), "written": written,
        "scratch_write": scratch, "control_read": control_read, "uid": os.getuid(),
    }  # fmt: skip


def main() -> None:
    pid, paths = int(sys.argv[1]), sys.argv[2:]
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") != "episode":
            continue
        ep = msg["episode_id"]
        if ep.endswith("::t1"):
            sys.stdout.write("A" * (4 << 20))  # a flood with no newline
            sys.stdout.flush()
            findings: dict[str, Any] = {"flooded": True}
        else:
            findings = probe(msg, pid, paths)
        send({"type": "report", "episode_id": ep, "reported_success": True, "halted": False,
              "message": json.dumps(findings)})  # fmt: skip


if __name__ == "__main__":
    main()
