"""What of the host a contained command needs read-only to run exactly as uncontained.

A command names two kinds of file. Its **programs** (the first word, and any file
argument in a ``bin`` directory, e.g. ``env /opt/venv/bin/python``) are followed as the
kernel and the interpreter follow them: every symbolic link on the way (a venv's
``python`` links to its base interpreter), each one's install prefix (the parent of its
``bin``), a script's ``#!`` interpreter, and for a Python venv its ``pyvenv.cfg`` home
and the directories its ``.pth`` files and editable-install finders add to
``sys.path``. A program's path is passed to the sandbox as given, never resolved, so a
venv's interpreter still finds its ``pyvenv.cfg`` there. Its **scripts** (every other
argument naming a file) bring their directory, and every ``node_modules`` directory and
``package.json`` above it, which is where Node.js looks for packages and a package's
module type. An argument naming a directory is data, not program: it is not mounted.

Nothing under ``/usr`` is listed (every sandbox has it), and no shared directory
(``/``, ``/tmp``, ``/home``, ...) is ever mounted whole: a file loose in one is mounted
alone.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

from effectbench.agents.shims import unshimmed

__all__ = ["SHARED_DIRS", "absolute_argv", "is_program", "program_paths"]

SHARED_DIRS: Final = frozenset(
    ("/", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/run", "/proc", "/home", "/root", "/etc")
)
"""Directories never mounted whole as an agent's program directory (they hold other
users' and the harness's files); a script directly inside one is mounted alone."""
_USR: Final = Path("/usr")
_MAX_LINKS: Final = 40
_MAX_SHEBANGS: Final = 4
_EDITABLE_FINDER: Final = "__editable___*_finder.py"


def is_program(index: int, arg: str) -> bool:
    """The command's first word, or a file argument in a ``bin`` directory."""
    if index == 0:
        return True
    return not arg.startswith("-") and Path(arg).parent.name == "bin" and Path(arg).is_file()


def absolute_argv(argv: Sequence[str]) -> list[str]:
    """The command with its program found on PATH and file arguments made absolute, so
    it runs the same inside the sandbox, whose working directory is the scratch dir.
    Programs keep their links (a venv's ``bin/python`` must stay that path); scripts
    are resolved, as Python and Node.js resolve them for their own imports."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if i == 0 and "/" not in arg:
            found = shutil.which(arg)
            out.append(unshimmed(found) if found is not None else arg)
        elif i == 0 and _exists(arg, Path.is_file):
            out.append(unshimmed(os.path.abspath(arg)))
        elif arg.startswith("-") or not _exists(arg, Path.exists):
            out.append(arg)
        elif is_program(i, arg):
            out.append(os.path.abspath(arg))
        else:
            out.append(str(Path(arg).resolve()))
    return out


def _exists(arg: str, test: Callable[[Path], bool]) -> bool:
    """``test`` of ``arg`` as a path; False for an argument no path can be (a script
    given with ``-c``, longer than a file name may be, or holding a NUL)."""
    try:
        return test(Path(arg))
    except (OSError, ValueError):
        return False


def _system(path: Path) -> bool:
    """Under ``/usr`` (or a merged-usr link to it): every sandbox mounts it anyway."""
    parent = path.parent.resolve()
    return parent == _USR or _USR in parent.parents


def _dir_or_file(directory: Path, file: Path) -> str:
    return str(file) if str(directory) in SHARED_DIRS else str(directory)


def _prefix(program: Path) -> str:
    """A program's install prefix: the parent of its ``bin`` directory, else its own
    directory; the file alone where that would be a shared directory."""
    bin_dir = program.parent
    if bin_dir.name == "bin" and str(bin_dir.parent) not in SHARED_DIRS:
        return str(bin_dir.parent)
    return _dir_or_file(bin_dir, program)


def _links(program: Path) -> Iterator[Path]:
    """``program`` and every file its symbolic links pass through, the real one last."""
    here = Path(os.path.abspath(program))
    seen = {here}
    yield here
    for _ in range(_MAX_LINKS):
        if not here.is_symlink():
            break
        here = Path(os.path.normpath(here.parent / os.readlink(here)))
        if here in seen:
            break
        seen.add(here)
        yield here
    real = program.resolve()
    if real not in seen:
        yield real


def _shebang(program: Path) -> Path | None:
    """The interpreter a ``#!`` line names by absolute path (``/usr/bin/env NAME`` looks
    NAME up on the sandbox's PATH, under ``/usr``: nothing to mount)."""
    try:
        with program.open("rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    return Path(words[0]) if words and words[0].startswith("/") else None


def _finder_paths(finder: Path) -> list[str]:
    """The package directories a setuptools editable finder maps (its ``MAPPING``)."""
    try:
        tree = ast.parse(finder.read_text("utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "MAPPING" and value is not None:
            try:
                mapping = ast.literal_eval(value)
            except ValueError:
                return []
            if isinstance(mapping, dict):
                return [v for v in mapping.values() if isinstance(v, str)]
    return []


def _pth_paths(site: Path) -> list[str]:
    """The directories ``site``'s ``.pth`` files and editable finders put on sys.path."""
    try:
        names = sorted(entry.name for entry in os.scandir(site))  # one pass: it can be large
    except OSError:
        return []
    found: list[str] = []
    for name in names:
        if name.endswith(".pth"):
            try:
                lines = (site / name).read_text("utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                line = line.rstrip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    found.append(os.path.normpath(site / line))
        elif fnmatch.fnmatchcase(name, _EDITABLE_FINDER):
            found += _finder_paths(site / name)
    return found


def _python_paths(prefix: Path) -> list[str]:
    """For a Python prefix: a venv's base interpreter (its ``pyvenv.cfg`` home), and
    what the prefix's site-packages add to sys.path; nothing for any other prefix."""
    try:
        cfg = (prefix / "pyvenv.cfg").read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        cfg = ""
    paths: list[str] = []
    for line in cfg.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip().startswith("/"):
            home = Path(value.strip())
            paths.append(str(home.parent) if home.name == "bin" else str(home))
    for site in sorted(prefix.glob("lib*/python*/site-packages")):
        paths += _pth_paths(site)
    return paths


def _program(program: Path, depth: int = 0) -> list[str]:
    paths: list[str] = []
    for hop in _links(program):
        if _system(hop):
            continue
        prefix = _prefix(hop)
        if prefix not in paths:  # links within one prefix (python -> python3.11)
            paths.append(prefix)
            paths += _python_paths(Path(prefix))
    interpreter = _shebang(program)
    if interpreter is not None and depth < _MAX_SHEBANGS:
        paths += _program(interpreter, depth + 1)
    return paths


def _script(script: Path) -> list[str]:
    """A script's directory, and the ``node_modules`` and ``package.json`` above it."""
    real = script.resolve()
    if _system(real):
        return []
    paths = [_dir_or_file(real.parent, real)]
    for up in real.parent.parents:
        if str(up) in SHARED_DIRS:
            break
        paths += [str(up / n) for n in ("node_modules", "package.json") if (up / n).exists()]
    return paths


def _usable(path: str) -> bool:
    p = Path(path)
    return p.exists() and path not in SHARED_DIRS and not (p == _USR or _USR in p.parents)


def program_paths(argv: Sequence[str]) -> list[str]:
    """Host paths the command's own program needs read-only (the module docstring says
    which), each once, in the order found."""
    paths: list[str] = []
    for i, arg in enumerate(argv):
        found = shutil.which(arg) if i == 0 and "/" not in arg else None
        candidate = Path(found or arg)
        if (i > 0 and arg.startswith("-")) or not candidate.is_file():
            continue
        paths += _program(candidate) if is_program(i, arg) else _script(candidate)
    return [p for p in dict.fromkeys(paths) if _usable(p)]
