"""Roundup trackers on this machine: one pristine tracker per run, one live copy per episode.

``build_pristine`` runs ``roundup-admin install`` and ``initialise`` once and seeds the
help-desk world (``seed.py``, run by the tracker's own Python API in a subprocess).
``Tracker.start`` copies that folder (~15 ms), points its ``web`` URL at the episode's
fault proxy (Roundup writes absolute form actions and redirects from it, so a wrong URL
lets the next submission bypass the proxy), sets the CSRF variant, and starts
``roundup-server`` on a fresh port.

A server must never outlive the harness: each one is started with
``PR_SET_PDEATHSIG = SIGKILL`` (Linux), so when the harness process dies, even by
SIGKILL, the kernel kills its servers. The signal follows the *thread* that forked
the child, so servers are forked from the event loop's thread, never a worker thread.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import aiohttp
import anyio

from effectbench.core.children import die_with_parent

__all__ = ["NAME", "Tracker", "build_pristine", "die_with_parent", "roundup_bin"]

NAME: Final = "tp"
"""The tracker's name in its URL (``/tp/``)."""
ADMIN_PASSWORD: Final = "admin-pw-effectbench"
PBKDF2_ROUNDS: Final = 1000
"""Roundup's default (250,000) costs ~0.2 s of CPU per login; these are throwaway trackers."""
READY_TIMEOUT_S: Final = 240.0
"""Generous: on an overloaded machine a start can take a minute; `--provider-timeout`
bounds the whole provision anyway."""
MODE: Final = "thread"
"""roundup-server's multiprocess mode. The default, fork, forks a child per request that
opens the tracker and compiles its templates again every time (0.11-0.25 s a page here,
against 0.06-0.10 s in thread mode, which keeps them); a one-user episode gains
nothing from fork's isolation."""
STOP_TIMEOUT_S: Final = 5.0
BIND_ATTEMPTS: Final = 3
PROBE_TIMEOUT_S: Final = 5.0
_WEB: Final = re.compile(r"^web = .*$", re.MULTILINE)
_CSRF: Final = re.compile(r"^csrf_enforce_token = .*$", re.MULTILINE)


def roundup_bin(name: str) -> str:
    """A Roundup script installed beside this interpreter (the venv's ``bin``)."""
    here = Path(sys.executable).with_name(name)
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(
            f"{name} is not installed: install the effectbench-roundup distribution (make setup)"
        )
    return found


def _run(args: list[str], what: str) -> None:
    proc = subprocess.run(
        args,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=die_with_parent,  # the blocked worker thread lives as long as the child
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {tail[0]}")


def build_pristine(home: Path) -> None:
    """Install, initialise and seed one tracker at ``home`` (blocking; ~1.5 s)."""
    options = ",".join(
        (
            "tracker_web=http://127.0.0.1:1/tp/",
            "mail_domain=localhost",
            "mail_host=localhost",
            f"password_pbkdf2_default_rounds={PBKDF2_ROUNDS}",
            "mail_debug=mail.log",
        )
    )
    admin = roundup_bin("roundup-admin")
    _run([admin, "-i", str(home), "install", "classic", "sqlite", options], "roundup-admin install")
    _run([admin, "-i", str(home), "initialise", ADMIN_PASSWORD], "roundup-admin initialise")
    seed = Path(__file__).with_name("seed.py")
    _run([sys.executable, str(seed), str(home)], "seeding the tracker")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def configure(home: Path, web: str, csrf: bool) -> None:
    """Point the copy at its proxy and set its CSRF variant."""
    config = home / "config.ini"
    text = config.read_text(encoding="utf-8")
    text = _WEB.sub(f"web = {web}", text, count=1)
    text = _CSRF.sub(f"csrf_enforce_token = {'yes' if csrf else 'no'}", text, count=1)
    config.write_text(text, encoding="utf-8")


class _PortTaken(Exception):
    """roundup-server could not bind its port: someone took it after we picked it."""


class Tracker:
    """One episode's tracker: its folder and its ``roundup-server`` process."""

    def __init__(self, pristine: Path, home: Path) -> None:
        self._pristine = pristine
        self.home = home
        self.port = _free_port()
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def upstream(self) -> str:
        """The server's own origin (the proxy forwards here)."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def gone(self) -> str | None:
        """Why the episode's roundup-server is no longer serving, or None while it runs."""
        proc = self._proc
        if proc is None:
            return None
        code = proc.returncode
        if code is None:  # it may have exited and not been reaped yet: ask, leaving it be
            try:
                info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped this instant: its return code is on its way
                info = None
            else:
                if info is None:
                    return None
            if info is not None:
                killed = info.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
                code = -info.si_status if killed else info.si_status
        how = "" if code is None else f" (signal {-code})" if code < 0 else f" (status {code})"
        return f"the Roundup tracker (roundup-server, pid {proc.pid}) died{how}"

    async def start(
        self, web: str, csrf: bool, on_port: Callable[[str], None] | None = None
    ) -> None:
        """Copy, configure and serve. The port is picked free but not held (roundup-server
        binds it itself), so another process can take it first: then a fresh port is
        tried, and ``on_port`` is told the new upstream URL (the proxy forwards there)."""
        await anyio.to_thread.run_sync(self._copy, web, csrf)
        for attempt in range(BIND_ATTEMPTS):
            if attempt:
                self.port = _free_port()
                if on_port is not None:
                    on_port(self.upstream)
            await self._spawn()
            try:
                await self._wait_ready()
                return
            except _PortTaken:
                continue
        raise RuntimeError(f"roundup-server found no free port in {BIND_ATTEMPTS} attempts")

    async def _spawn(self) -> None:
        args = [roundup_bin("roundup-server")]
        if os.geteuid() == 0:
            args += ["-u", "root"]  # roundup-server refuses to run as root otherwise
        args += ["-t", MODE, "-n", "127.0.0.1", "-p", str(self.port), f"{NAME}={self.home}"]
        env = {**os.environ, "SENDMAILDEBUG": str(self.home / "mail.log")}
        log = (self.home / "server.log").open("wb")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                preexec_fn=die_with_parent,
            )
        finally:
            log.close()

    def _copy(self, web: str, csrf: bool) -> None:
        shutil.copytree(self._pristine, self.home)
        configure(self.home, web, csrf)

    async def _wait_ready(self) -> None:
        proc = self._proc
        assert proc is not None
        url = f"{self.upstream}{NAME}/"
        deadline = anyio.current_time() + READY_TIMEOUT_S
        # A short limit per probe: whoever holds a port we lost may accept and never answer.
        probe = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
        async with aiohttp.ClientSession(
            cookie_jar=aiohttp.DummyCookieJar(), timeout=probe
        ) as session:
            while True:
                if proc.returncode is not None:
                    if "Unable to bind" in self._log_tail():
                        raise _PortTaken
                    raise RuntimeError(
                        f"roundup-server exited with {proc.returncode}: {self._log_tail()}"
                    )
                try:
                    async with session.get(url, allow_redirects=False) as resp:
                        await resp.read()
                        if resp.status == 200:
                            return
                except (aiohttp.ClientError, TimeoutError):
                    pass
                if anyio.current_time() > deadline:
                    raise RuntimeError(
                        f"roundup-server not ready after {READY_TIMEOUT_S:g}s: {self._log_tail()}"
                    )
                await anyio.sleep(0.02)

    def _log_tail(self) -> str:
        try:
            lines = (self.home / "server.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no server log"
        return lines[-1] if lines else "empty server log"

    async def stop(self) -> None:
        """Stop the server and wait for it (so its port is free), then delete the folder."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.terminate()
            with anyio.move_on_after(STOP_TIMEOUT_S):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.home, ignore_errors=True))
