"""Screenshots of a protocol agent's episode page, as evidence (docs/agent-protocol.md).

One ``Shots`` per episode. It answers the agent's ``screenshot`` requests and, for an
agent with a browser, applies ``--screenshots``: ``all`` captures the page after each
action the agent reports (one capture waits at a time: actions that arrive meanwhile
are covered by it) and at its report, ``final`` only at its report, ``none`` never.
The harness captures over its own connection to the browser (``PageCamera``), only the
episode's own page; each image goes into the episode's telemetry, so the scheduler
stores it once by content hash and logs an ``episode.screenshot`` event citing it.

A hostile agent cannot use this to fill the disk: at most ``MAX_SHOTS`` captures (and
``MAX_SHOT_BYTES`` of PNG) per episode, requested and automatic together, plus the one
at the report; past either, requests are answered with an error and automatic captures
stop. At most ``MAX_WAITING`` requests may wait for their answer at once: one more is
a malformed message (the agent is not reading its answers).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import anyio
import anyio.abc
import attrs

from effectbench.agents import protocol
from effectbench.core.errors import one_line
from effectbench.core.provider import PageCamera, ScreenshotPolicy, Telemetry

__all__ = ["FINAL_LABEL", "MAX_SHOTS", "MAX_SHOT_BYTES", "MAX_WAITING", "Shots"]

MAX_SHOTS: Final = 100
"""Captures per episode, requested and automatic together (the report's is extra)."""
MAX_SHOT_BYTES: Final = 32 << 20
"""PNG bytes per episode over those captures."""
MAX_WAITING: Final = 16
"""Requests that may wait for their answer at once."""
FINAL_LABEL: Final = "at report"
CAPTURE_TIMEOUT_S: Final = 15.0
NO_BROWSER: Final = (
    "this agent has no browser page to capture: run it as exec+browser: "
    "(or ExecArm(..., browser=True))"
)
OFF: Final = "screenshots are off in this run (--screenshots none); none is taken or stored"

Send = Callable[[bytes], Awaitable[None]]


class TooManyWaiting(Exception):
    """More requests wait for their answer than ``MAX_WAITING``."""


@attrs.frozen
class _Request:
    ident: str | int | None
    label: str
    image: bool


def _size(png: bytes) -> tuple[int, int] | None:
    if png.startswith(b"\x89PNG") and len(png) >= 24:
        w, h = struct.unpack(">II", png[16:24])
        return int(w), int(h)
    return None


@attrs.define
class Shots:
    """One episode's screenshots: the agent's requests and ``--screenshots``'s captures."""

    episode_id: str
    telemetry: Telemetry
    camera: PageCamera | None
    send: Send
    policy: ScreenshotPolicy = "all"
    taken: int = 0
    taken_bytes: int = 0
    tg: anyio.abc.TaskGroup | None = None
    """Where ``serve`` starts, at the first request or capture (an episode that takes
    none costs no task)."""
    _waiting: deque[_Request] = attrs.field(factory=deque)
    _auto: bool = False
    _wake: anyio.Event = attrs.field(factory=anyio.Event)
    _serving: bool = False

    def _kick(self) -> None:
        self._wake.set()
        if not self._serving and self.tg is not None:
            self._serving = True
            self.tg.start_soon(self.serve)

    def request(self, msg: Mapping[str, Any]) -> None:
        """Queue an agent's ``screenshot`` request (answered by ``serve``, in order)."""
        if len(self._waiting) >= MAX_WAITING:
            raise TooManyWaiting(
                f"the agent has more than {MAX_WAITING} screenshot requests waiting for "
                "their answer (read each screenshot_result before asking again)"
            )
        ident = msg.get("id")
        self._waiting.append(_Request(ident, str(msg.get("label", "")), msg.get("image") is True))
        self._kick()

    def acted(self) -> None:
        """An action was recorded: under ``all``, capture the page after it."""
        if self.camera is not None and self.policy == "all":
            self._auto = True
            self._kick()

    async def serve(self) -> None:
        """Answer requests and take automatic captures until cancelled (episode over)."""
        while True:
            if not self._waiting and not self._auto:
                self._wake = anyio.Event()
                await self._wake.wait()
            if self._waiting:
                await self._answer(self._waiting.popleft())
            elif self._auto:
                self._auto = False
                await self._after_action()

    async def _after_action(self) -> None:
        """The automatic capture after the latest action; skipped past the caps, and a
        failed one is simply not taken (the harness's capture, not the agent's fault)."""
        after = len(self.telemetry.actions)
        if self._room() is not None or after == 0:
            return
        kind = self.telemetry.actions[after - 1].kind
        with contextlib.suppress(Exception):
            await self._take(f"after action {after} ({kind[:64]})", after)

    async def final(self) -> None:
        """The capture at the agent's report (``final`` and ``all``); never fails it."""
        if self.camera is None or self.policy == "none":
            return
        after = len(self.telemetry.actions)
        with anyio.move_on_after(CAPTURE_TIMEOUT_S):
            try:
                png = await self.camera.capture()
            except Exception:  # noqa: BLE001 - the harness's capture: not the agent's failure
                return
            self.telemetry.screenshot(png, FINAL_LABEL, after=after)

    def _room(self) -> str | None:
        """Why no more captures are taken in this episode, or None."""
        if self.taken >= MAX_SHOTS:
            return f"this episode's screenshot cap is reached ({MAX_SHOTS} captures)"
        if self.taken_bytes >= MAX_SHOT_BYTES:
            return f"this episode's screenshot cap is reached ({MAX_SHOT_BYTES} bytes of PNG)"
        return None

    async def _take(self, label: str, after: int, *, keep: bool = True) -> bytes:
        """One capture, counted against the caps; recorded as evidence when ``keep``."""
        assert self.camera is not None
        self.taken += 1
        with anyio.fail_after(CAPTURE_TIMEOUT_S):
            png = await self.camera.capture()
        self.taken_bytes += len(png)
        if keep:
            self.telemetry.screenshot(png, label, after=after)
        return png

    async def _answer(self, req: _Request) -> None:
        why = (
            NO_BROWSER if self.camera is None
            else OFF if self.policy == "none"
            else self._room()
        )  # fmt: skip
        answer: dict[str, Any]
        if why is not None:
            answer = {"ok": False, "error": why}
        else:
            label = f"agent: {req.label}" if req.label else "agent request"
            kept = self.policy == "all"
            try:
                png = await self._take(label, len(self.telemetry.actions), keep=kept)
            except Exception as exc:  # noqa: BLE001 - told to the agent; the episode goes on
                answer = {"ok": False, "error": f"the page could not be captured: {one_line(exc)}"}
            else:
                answer = _described(png, label, kept, req.image)
        line = protocol.screenshot_result(self.episode_id, req.ident, answer)
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self.send(line)  # a process that is gone: its episode fails by its exit


def _described(png: bytes, label: str, kept: bool, image: bool) -> dict[str, Any]:
    width, height = _size(png) or (None, None)
    answer: dict[str, Any] = {
        "ok": True,
        "sha256": hashlib.sha256(png).hexdigest(),
        "bytes": len(png),
        "width": width,
        "height": height,
        "label": label,
        "kept": kept,
    }
    if image:
        answer["png_base64"] = base64.b64encode(png).decode("ascii")
    return answer
