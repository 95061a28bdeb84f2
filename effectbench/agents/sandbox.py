"""Containment for protocol agents: a bubblewrap sandbox, or an honest "not available".

The sandbox gives the agent process its own mount, PID, IPC, UTS and user namespaces:
a read-only view of the system's programs and libraries (``/usr`` and the merged-usr
links, a few files of ``/etc``), its own program files read-only (its venv, install
prefixes and ``node_modules``: ``effectbench.agents.prefixes``), a private tmpfs as
scratch (``/tmp``, also ``$HOME`` and the working directory), a fresh ``/proc`` that
shows only its own processes, and a minimal ``/dev``. Nothing else of the host is
mounted: not the run directory, not ``/dev/shm`` or the host's ``/tmp`` (where
MockMed's episode databases live). When the harness runs as root the sandbox is
entered as uid/gid 65534 (nobody), inside and outside the user namespace.

The network namespace is the host's, so the episode's HTTP channel on 127.0.0.1 is
reachable; docs/agent-protocol.md states what that leaves open.

One builder (``sandbox_argv``) serves every contained program; a ``Profile`` says what
one kind gets beyond that base: ``AGENT`` (protocol agents) nothing, ``BROWSER``
(Chromium, ``effectbench.browser.contain``) fonts and its own ``/dev/shm`` and profile.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from effectbench.agents.prefixes import SHARED_DIRS, absolute_argv, program_paths

NOBODY: Final = 65534
SCRATCH: Final = "/tmp"
_ETC: Final = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/hosts",
    "/etc/nsswitch.conf",
)
_TOP_LEVEL: Final = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SAFE_PATH: Final = "/usr/local/bin:/usr/bin:/bin"


@attrs.frozen
class Containment:
    """Whether this host can isolate agents, and if not, why (one line)."""

    available: bool
    reason: str
    bwrap: str | None = None
    setpriv: str | None = None


def _top_level_args() -> list[str]:
    args: list[str] = []
    for top in _TOP_LEVEL:
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    return args


def _ro_binds(paths: Iterable[str]) -> list[str]:
    args: list[str] = []
    for p in dict.fromkeys(paths):
        args += ["--ro-bind-try", p, p]
    return args


def let_nobody_reach(paths: Iterable[str]) -> None:
    """Give "others" search (x) permission on every parent of ``paths``, and on each
    path that is a directory (root only).

    As root the sandbox is set up as nobody, and bubblewrap binds each program path as
    that user: under a parent nobody cannot enter (a checkout in root's 0700 home) every
    episode failed ("bwrap: Can't find source path ...: Permission denied"), and in an
    agent's own 0700 directory (``mktemp -d``) holding the run directory, bubblewrap
    could not see the run directory it masks ("Can't mkdir .../run"), nor could the
    agent read its own script. Search permission lists nothing; it only lets nobody
    reach paths whose own mode allows it (what effectbench.postgres.server does for the
    PostgreSQL binaries too)."""
    for p in paths:
        path = Path(p)
        chain = [path] if path.is_dir() else []
        for parent in path.parents:
            if parent == Path("/"):
                break
            chain.append(parent)
        for d in chain:
            mode = d.stat().st_mode
            if not mode & 0o001:
                d.chmod(mode | 0o001)


@attrs.frozen
class Profile:
    """What one kind of sandboxed program gets beyond the common base (the system's
    programs and libraries read-only, a private ``/tmp``, ``/proc``, a minimal ``/dev``).

    ``etc``: extra files of ``/etc`` read-only; ``tmpfs``: extra private, writable
    directories (a browser's profile and its ``/dev/shm``); ``pdeathsig``: the dropped
    process asks for SIGKILL when its parent dies (setpriv clears what was asked before
    it changed the uid), for programs whose launcher relies on it."""

    name: str
    etc: tuple[str, ...] = ()
    tmpfs: tuple[str, ...] = ()
    pdeathsig: bool = False


@attrs.frozen
class Network:
    """A network namespace of the sandbox's own: nothing of the host's network (no
    loopback port, no abstract Unix socket such as an X server's) is reachable from it.
    ``launcher`` runs first inside it and starts the program (agents/door.py's door,
    which opens the ports the harness lets through); ``ro_binds`` are (host path,
    sandbox path) pairs mounted read-only (the directory of the door's sockets)."""

    launcher: tuple[str, ...]
    ro_binds: tuple[tuple[str, str], ...] = ()


AGENT: Final = Profile("agent")
BROWSER: Final = Profile(
    "browser",
    etc=("/etc/fonts", "/etc/chromium", "/etc/chromium.d"),
    tmpfs=("/dev/shm",),
    pdeathsig=True,
)
"""Chromium: fontconfig and Debian's launcher settings read-only, and its own empty
``/dev/shm`` (never the host's, where MockMed keeps episode databases)."""


def sandbox_argv(
    containment: Containment,
    argv: Sequence[str],
    *,
    profile: Profile = AGENT,
    hide: Sequence[str] = (),
    scratch: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    network: Network | None = None,
) -> list[str]:
    """The command line that runs ``argv`` inside the sandbox, as nobody, for one
    ``profile``. ``hide`` are host directories (the run directory) masked with an empty
    tmpfs should a program directory contain them; ``scratch`` are more private,
    writable directories (paths inside the sandbox, e.g. a browser's profile).
    ``network``: a network namespace of the sandbox's own, and what runs before
    ``argv`` in it (None: the host's network)."""
    assert containment.available and containment.bwrap is not None
    argv = absolute_argv(argv)
    launcher: list[str] = []
    net: list[str] = []
    if network is not None:
        launcher = list(network.launcher)
        net = ["--unshare-net"]
        for source, dest in network.ro_binds:
            net += ["--ro-bind", source, dest]
    prefix: list[str] = []
    if containment.setpriv is not None:
        prefix = [containment.setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        if profile.pdeathsig:
            prefix.append("--pdeathsig=KILL")
    programs = program_paths(argv) + program_paths(launcher[:1])  # the rest: its own code
    if containment.setpriv is not None:
        let_nobody_reach(programs)
        if network is not None:
            let_nobody_reach(source for source, _ in network.ro_binds)
    masks: list[str] = []
    for h in hide:
        real = str(Path(h).resolve())
        if any(real == p or real.startswith(p.rstrip("/") + "/") for p in programs):
            masks += ["--tmpfs", real]
    setenv: list[str] = []
    for key, value in {
        "PATH": SAFE_PATH,
        "HOME": SCRATCH,
        "LANG": "C.UTF-8",
        **(env or {}),
    }.items():
        setenv += ["--setenv", key, value]
    private: list[str] = []
    for d in dict.fromkeys((*profile.tmpfs, *scratch)):
        private += ["--tmpfs", d]
    return [
        *prefix,
        containment.bwrap,
        "--unshare-user",
        "--uid", str(NOBODY),
        "--gid", str(NOBODY),
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        *net,
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        *setenv,
        "--ro-bind", "/usr", "/usr",
        *_top_level_args(),
        *_ro_binds((*_ETC, *profile.etc)),
        "--tmpfs", SCRATCH,  # before the program binds, so a program under /tmp stays visible
        *_ro_binds(programs),
        *masks,
        "--proc", "/proc",
        "--dev", "/dev",
        *private,
        "--chdir", SCRATCH,
        "--remount-ro", "/dev",
        "--remount-ro", "/",
        "--",
        *launcher,
        *argv,
    ]  # fmt: skip


def wrap(
    containment: Containment,
    argv: Sequence[str],
    *,
    hide: Sequence[str] = (),
    env: dict[str, str] | None = None,
    network: Network | None = None,
) -> list[str]:
    """The command line that runs an agent's ``argv`` inside the sandbox (profile
    ``AGENT``). ``hide`` are host directories (the run directory) masked with an empty
    tmpfs should a program directory contain them; ``network``: a network of its own
    (agents/door.py)."""
    return sandbox_argv(containment, argv, profile=AGENT, hide=hide, env=env, network=network)


@functools.cache
def probe() -> Containment:
    """Can this host run the sandbox? Tried once per process with a real ``true``."""
    if os.uname().sysname != "Linux":
        return Containment(
            False, f"agent containment needs Linux namespaces; this is {os.uname().sysname}"
        )
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Containment(
            False, "agent containment needs bubblewrap (bwrap), which is not installed"
        )
    setpriv = shutil.which("setpriv") if os.geteuid() == 0 else None
    if os.geteuid() == 0 and setpriv is None:
        return Containment(
            False, "running as root, agent containment needs setpriv to drop to nobody"
        )
    trial = Containment(True, "bubblewrap", bwrap, setpriv)
    true = shutil.which("true") or "/usr/bin/true"
    try:
        done = subprocess.run(
            wrap(trial, [true]),
            capture_output=True,
            timeout=10,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Containment(False, f"bubblewrap could not start: {exc}")
    if done.returncode != 0:
        why = " ".join(done.stderr.decode("utf-8", "replace").split()) or f"exit {done.returncode}"
        return Containment(False, f"bubblewrap cannot create namespaces here: {why}")
    return trial


__all__ = [
    "AGENT",
    "BROWSER",
    "SHARED_DIRS",
    "Containment",
    "Network",
    "Profile",
    "absolute_argv",
    "let_nobody_reach",
    "probe",
    "program_paths",
    "sandbox_argv",
    "wrap",
]
