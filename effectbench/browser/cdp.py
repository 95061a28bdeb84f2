"""A headless Chromium the harness speaks raw CDP to, over ``--remote-debugging-pipe``.

The episode endpoints of protocol agents (``effectbench.browser.cdp_proxy``) need a raw
DevTools connection: Playwright's own pipe is private to its driver. The browser
listens on no port at all (a debugging port on 127.0.0.1 would be open to every
process on the host, agents included, with no authentication): it reads commands on
fd 3 and writes replies on fd 4, NUL-delimited JSON, and only the harness holds the
other ends. It is started through the same ``PR_SET_PDEATHSIG`` launcher as the
pool's browsers, so it dies with the harness, and inside the same sandbox
(``effectbench.browser.contain``): nobody, with no view of the host's files.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, Final

import orjson

from effectbench.browser.contain import PROFILE_DIR, BrowserSandbox, browser_sandbox
from effectbench.browser.launch import FLAGS, BrowserUnavailable, find_chromium

CALL_TIMEOUT_S: Final = 15.0
_LAUNCH: Final = (
    "import ctypes,os,sys\n"
    "ctypes.CDLL(None).prctl(1, 9)\n"  # PR_SET_PDEATHSIG, SIGKILL
    "if os.getppid() != int(sys.argv[1]): os._exit(1)\n"
    "os.dup2(int(sys.argv[2]), 3); os.dup2(int(sys.argv[3]), 4)\n"
    "os.execv(sys.argv[4], sys.argv[4:])\n"
)
Message = dict[str, Any]


class CdpError(Exception):
    """A DevTools command the browser answered with an error (or never answered)."""


class _Reader(asyncio.Protocol):
    def __init__(self, on_message: Callable[[Message], None], on_lost: Callable[[], None]) -> None:
        self._buf = bytearray()
        self._on_message = on_message
        self._on_lost = on_lost

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while (end := self._buf.find(b"\0")) >= 0:
            raw = bytes(self._buf[:end])
            del self._buf[: end + 1]
            with contextlib.suppress(orjson.JSONDecodeError):
                msg = orjson.loads(raw)
                if isinstance(msg, dict):
                    self._on_message(msg)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()


class CdpPipe:
    """One Chromium and the harness's raw DevTools connection to it.

    ``call`` sends a command of the harness's own (root session unless ``session``)
    and waits for its reply; ``post`` sends a message as is (the proxy's relaying);
    every message the browser sends that is not a reply to ``call`` goes to
    ``on_message``.
    """

    def __init__(
        self, on_message: Callable[[Message], None], *, sandbox: BrowserSandbox | None = None
    ) -> None:
        self._on_message = on_message
        self._sandbox = sandbox
        self._proc: asyncio.subprocess.Process | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._pending: dict[tuple[str | None, int], asyncio.Future[Message]] = {}
        self._next_id = 1
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.alive = False

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    async def start(self, *, executable: str | None = None, args: Sequence[str] = ()) -> None:
        exe = executable or find_chromium()
        box = browser_sandbox() if self._sandbox is None else self._sandbox
        loop = asyncio.get_running_loop()
        if box.contained:
            profile = PROFILE_DIR  # inside the sandbox's private /tmp
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="effectbench-cdp-")
            profile = self._tmp.name
        browser = box.argv(exe, [
            *FLAGS, *args, "--headless", "--remote-debugging-pipe",
            f"--user-data-dir={profile}", "about:blank",
        ])  # fmt: skip
        browser_in, to_browser = os.pipe()  # the browser reads commands on fd 3
        from_browser, browser_out = os.pipe()  # and writes replies on fd 4
        argv = [
            sys.executable, "-I", "-S", "-c", _LAUNCH, str(os.getpid()),
            str(browser_in), str(browser_out), *browser,
        ]  # fmt: skip
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(browser_in, browser_out),
            )
        except OSError as exc:
            raise BrowserUnavailable(f"Chromium at {exe} failed to start ({exc})") from None
        finally:
            os.close(browser_in)
            os.close(browser_out)
        self.alive = True
        write_pipe = os.fdopen(to_browser, "wb", buffering=0)
        read_pipe = os.fdopen(from_browser, "rb", buffering=0)
        self._writer, _ = await loop.connect_write_pipe(asyncio.Protocol, write_pipe)
        await loop.connect_read_pipe(lambda: _Reader(self._dispatch, self._lost), read_pipe)
        try:
            await self.call("Browser.getVersion")
        except CdpError as exc:
            await self.stop()
            raise BrowserUnavailable(f"Chromium at {exe} gave no DevTools pipe ({exc})") from None

    def _lost(self) -> None:
        self.alive = False
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(CdpError("the browser closed its DevTools pipe"))
        self._pending.clear()

    def _dispatch(self, msg: Message) -> None:
        ident = msg.get("id")
        if isinstance(ident, int):
            fut = self._pending.pop((msg.get("sessionId"), ident), None)
            if fut is not None:
                if not fut.done():
                    fut.set_result(msg)
                return
        self._on_message(msg)

    def post(self, msg: Message) -> None:
        if self._writer is None or not self.alive:
            raise CdpError("the browser's DevTools pipe is closed")
        self._writer.write(orjson.dumps(msg) + b"\0")

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def call(
        self,
        method: str,
        params: Message | None = None,
        *,
        session: str | None = None,
        ident: int | None = None,
        timeout_s: float = CALL_TIMEOUT_S,
    ) -> Message:
        """Send one command and return its ``result`` (CdpError on an error reply)."""
        ident = self.next_id() if ident is None else ident
        msg: Message = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[(session, ident)] = fut
        try:
            self.post(msg)
            reply = await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            raise CdpError(f"{method}: no reply within {timeout_s:g}s") from None
        finally:
            self._pending.pop((session, ident), None)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error'].get('message', reply['error'])}")
        result: Message = reply.get("result") or {}
        return result

    async def stop(self) -> None:
        """Close the browser (Browser.close, then SIGKILL) and the pipes; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(CdpError):
                await self.call("Browser.close", timeout_s=3.0)
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self.alive = False
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self._tmp.cleanup()
            self._tmp = None
