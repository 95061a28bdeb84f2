"""What ``--force`` may replace, and whether a run still owns its directory.

``--force`` deletes, so it is allowed on one kind of directory only: an EffectBench
run directory, i.e. one whose ``events.jsonl`` starts with our ``run.started`` line and
which holds nothing but files a run writes, with no live run holding its lock. Anything
else is refused in one line and nothing is deleted; the files are removed one by one,
never with a recursive delete. A run also checks, before it reports anything, that the
log it holds open is still the one at its path: a directory replaced or removed under
it is an error, never another run's results.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from effectbench.core.errors import EffectBenchError
from effectbench.core.events import SCHEMA_MAJOR, RunStarted
from effectbench.core.rundir import LOG_FILE, RUN_FILES, SPILL_GLOB
from effectbench.run.runlock import log_lock

LOG_NAME: Final = LOG_FILE
_LEFTOVERS: Final = (*(f"{name}.tmp" for name in sorted(RUN_FILES)), SPILL_GLOB)
"""What a killed artifact build can leave: the first half of an atomic write, and a
spill file where the platform has no anonymous temporary files."""
_TORN_FIRST_LINE: Final = b'{"v":%d,"seq":0,"type":"%b",' % (SCHEMA_MAJOR, RunStarted.TYPE.encode())


class OutDirError(EffectBenchError):
    """An output directory that cannot be used or replaced; the message says what to do."""


class RunDirLost(EffectBenchError):
    """A run's directory was replaced or removed while the run was writing it."""


def prepare_out_dir(out: Path, *, force: bool) -> None:
    """Leave ``out`` an empty, writable directory to run in: the one guard of every
    command that writes a new run (run, reference, audit).

    An empty (or missing) directory is used as it is; a non-empty one only with
    ``force``, and only if it is a run directory (see the module docstring).
    """
    if out.exists() and not out.is_dir():
        raise OutDirError(f"--out {out} exists and is not a directory; choose another --out")
    if force:
        _refuse_protected(out)
    if out.is_dir():
        entries = _entries(out)
        if entries and not force:
            raise OutDirError(
                f"run directory {out} already exists and is not empty; continue it with "
                f"--resume {out}, choose another --out, or pass --force to replace it"
            )
        if entries:
            _replace(out, entries)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutDirError(f"cannot create run directory {out}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutDirError(f"run directory {out} is not writable; choose another --out")


def _entries(out: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(out) as it:
            return list(it)
    except OSError as exc:
        raise OutDirError(f"cannot read directory {out}: {exc.strerror or exc}") from None


def _refuse_protected(out: Path) -> None:
    """--force never replaces the current directory, one of its parents (``/`` included)
    or the home directory, whatever they hold: a mistyped --out must not cost them."""
    target = out.resolve()
    cwd = Path.cwd().resolve()
    try:
        home: Path | None = Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        home = None
    if target == cwd or target in cwd.parents:
        what = "the current directory" if target == cwd else "a parent of the current directory"
    elif target == home:
        what = "the home directory"
    else:
        return
    named = str(target) if str(out) == str(target) else f"{out}, that is {target}"
    raise OutDirError(
        f"--force never replaces {what} ({named}); give --out a run directory of its own"
    )


def _replace(out: Path, entries: Sequence[os.DirEntry[str]]) -> None:
    reason = _not_a_run_dir(out, entries)
    if reason is not None:
        raise OutDirError(
            f"--force replaces only an effectbench run directory, and {out} {reason}; nothing "
            "was deleted: choose another --out, or empty it yourself"
        )
    with _unlocked(out):
        for entry in entries:
            if entry.name == _BLOB_ROOT:
                _remove_blobs(entry)
                continue
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise OutDirError(f"cannot replace {out}: {exc.strerror or exc}") from None


def _remove_blobs(entry: os.DirEntry[str]) -> None:
    """Unlink the blob store's files one by one, then its two (now empty) folders."""
    files = _blob_files(entry)
    if isinstance(files, str):  # changed since it was checked
        raise OutDirError(f"cannot replace {entry.path}: it {files}; nothing more was deleted")
    try:
        for path in files:
            os.unlink(path)
        store = os.path.join(entry.path, "sha256")
        if os.path.isdir(store):
            os.rmdir(store)
        os.rmdir(entry.path)
    except OSError as exc:
        raise OutDirError(f"cannot replace {entry.path}: {exc.strerror or exc}") from None


def _allowed(name: str) -> bool:
    return name in RUN_FILES or any(fnmatch.fnmatchcase(name, p) for p in _LEFTOVERS)


_BLOB_ROOT: Final = "blobs"
_BLOB_NAME: Final = re.compile(r"(?:[0-9a-f]{64}\.png|\.tmp-\w+)")


def _blob_files(entry: os.DirEntry[str]) -> list[str] | str:
    """The files of a run's blob store (``blobs/sha256/<hex>.png``, see core/evidence.py), or
    why ``entry`` is not one: anything else under it is a user's and stops --force."""
    if not entry.is_dir(follow_symlinks=False):
        return f"holds {entry.name!r}, which is not a directory"
    inner = list(os.scandir(entry.path))
    if [e.name for e in inner] not in ([], ["sha256"]) or (
        inner and not inner[0].is_dir(follow_symlinks=False)
    ):
        return f"holds {entry.name}/ with something other than the run's sha256/ store"
    files = [] if not inner else list(os.scandir(inner[0].path))
    for f in files:
        if _BLOB_NAME.fullmatch(f.name) is None or not f.is_file(follow_symlinks=False):
            return f"holds {entry.name}/sha256/{f.name}, which no run writes"
    return [f.path for f in files]


def _not_a_run_dir(out: Path, entries: Sequence[os.DirEntry[str]]) -> str | None:
    """Why ``out`` is not a run directory --force may replace (None: it is one)."""
    names = sorted(e.name for e in entries)
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name == _BLOB_ROOT:
            blobs = _blob_files(entry)
            if isinstance(blobs, str):
                return blobs
            continue
        if not _allowed(entry.name):
            return f"holds {entry.name!r}, which no run writes"
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError as exc:
            return f"holds {entry.name!r}, which cannot be read ({exc.strerror or exc})"
        if not stat.S_ISREG(mode):
            return f"holds {entry.name!r}, which is not a regular file"
    if LOG_NAME not in names:
        return f"holds no {LOG_NAME}"
    return _not_our_log(out / LOG_NAME, only_file=names == [LOG_NAME])


def _not_our_log(log_path: Path, *, only_file: bool) -> str | None:
    """A log is ours when its first line is a valid ``run.started`` event. A run stopped
    before its first line was complete leaves an empty or torn log and nothing else."""
    from effectbench.log.reader import LogError, read_log

    try:
        first = next(iter(read_log(log_path, verify=True)), None)
    except LogError as exc:
        return f"its {LOG_NAME} is not an effectbench event log ({exc})"
    if first is not None:
        if first.type != RunStarted.TYPE:
            return f"its {LOG_NAME} does not start with a {RunStarted.TYPE} event"
        return None
    try:
        with open(log_path, "rb") as f:
            head = f.read(len(_TORN_FIRST_LINE))
    except OSError as exc:
        return f"its {LOG_NAME} cannot be read ({exc.strerror or exc})"
    if not _TORN_FIRST_LINE.startswith(head):
        return f"its {LOG_NAME} does not start with a {RunStarted.TYPE} event"
    if not only_file:
        return f"holds artifacts but its {LOG_NAME} records no complete event"
    return None


@contextlib.contextmanager
def _unlocked(out: Path) -> Iterator[None]:
    """Take the lock a live run holds on its log (run/runlock.py), without waiting, and
    keep it while the files are deleted: a running run is refused."""
    with log_lock(out / LOG_NAME, exclusive=True, flags=os.O_RDONLY | os.O_NOFOLLOW) as lock:
        if lock.error is not None:
            raise OutDirError(f"cannot replace {out}: {lock.error.strerror or lock.error}")
        if not lock.held:
            raise OutDirError(
                f"{out} is in use by a running effectbench process; nothing was deleted: wait "
                "for it to finish or stop it, or choose another --out"
            )
        yield


def check_still_ours(fd: int, log_path: Path) -> None:
    """Raise RunDirLost unless ``log_path`` still names the file open as ``fd``: after a
    replaced or removed directory, what is at the path is not this run's log."""
    held = os.fstat(fd)
    try:
        now = os.stat(log_path)
    except OSError:
        now = None
    if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
        raise lost(log_path.parent)


def lost(run_dir: Path) -> RunDirLost:
    """The one message for a run whose directory is no longer its own."""
    return RunDirLost(
        f"run directory {run_dir} was replaced or removed while this run was using it; this "
        f"run's results are not reported and whatever {run_dir} holds now is not this run: "
        "run it again with a fresh --out"
    )


__all__ = [
    "LOG_NAME",
    "RUN_FILES",
    "OutDirError",
    "RunDirLost",
    "check_still_ours",
    "lost",
    "prepare_out_dir",
]
