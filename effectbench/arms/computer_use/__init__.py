"""``computer_use``: a vision-model arm that sees only pixels of the episode's screen.

On a web episode the screen is the episode's browser page; on a remote_display episode
(its channels carry ``vnc``) it is the display's framebuffer over VNC (``vnc_screen``),
with the same action space at framebuffer coordinates, so one model is compared across
substrates in one run.

Each turn sends the current screenshot of the page (PNG) with the goal and the history
and performs the computer actions the model answers with (``actions``) at those
coordinates on the page (``screen``), at a viewport fixed for the run (default
1280x800, recorded as each episode's first action). The wire format is chosen by
configuration: ``openai`` (chat completions with image parts and function tools) or
``anthropic`` (the Messages API's computer tool).

Configured by options or, for what an option leaves unset, the environment:
``EFFECTBENCH_CU_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``), ``EFFECTBENCH_CU_MODEL``,
``EFFECTBENCH_CU_API_KEY``, ``EFFECTBENCH_CU_FORMAT`` (``openai``, the default, or
``anthropic``), ``EFFECTBENCH_CU_VIEWPORT`` (``WIDTHxHEIGHT``) and
``EFFECTBENCH_CU_PRICES`` (a price table file, as the ``llm`` arm's). Retries, pricing and
the endpoint client are the ``llm`` arm's (``effectbench.arms.llm.client``). See
docs/computer-use.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, Literal

import aiohttp

from effectbench.arms.computer_use.actions import Viewport
from effectbench.arms.computer_use.loop import Budget, run_loop
from effectbench.arms.computer_use.screen import PlaywrightScreen, Screen
from effectbench.arms.computer_use.turns import Wire
from effectbench.arms.llm.client import ChatClient, ModelEndpointError, RetryPolicy, Sleep
from effectbench.arms.llm.endpoint import EndpointArm, EndpointConfig
from effectbench.arms.llm.loop import user_prompt
from effectbench.core.arm import TaskView
from effectbench.core.errors import ConfigurationError
from effectbench.core.model import AgentReport
from effectbench.core.prices import PriceTable, PriceTableError
from effectbench.core.provider import EnvHandle

if TYPE_CHECKING:
    from playwright.async_api import Page

    from effectbench.displays.vnc import VncChannel

__all__ = [
    "Budget",
    "ComputerUseArm",
    "ComputerUseNotConfigured",
    "ModelEndpointError",
    "RetryPolicy",
    "Viewport",
    "entry_point",
]

ENV_PREFIX: Final = "EFFECTBENCH_CU"
ENV_BASE_URL: Final = f"{ENV_PREFIX}_BASE_URL"
ENV_MODEL: Final = f"{ENV_PREFIX}_MODEL"
ENV_API_KEY: Final = f"{ENV_PREFIX}_API_KEY"
ENV_FORMAT: Final = f"{ENV_PREFIX}_FORMAT"
ENV_VIEWPORT: Final = f"{ENV_PREFIX}_VIEWPORT"
ENV_PRICES: Final = f"{ENV_PREFIX}_PRICES"
FORMATS: Final = ("openai", "anthropic")
NO_BROWSER: Final = "no browser page: the harness gave this episode no browser channel"

WireFormat = Literal["openai", "anthropic"]
ScreenFactory = Callable[["Page", Viewport], Screen]
"""Builds an episode's screen over its page (default: ``PlaywrightScreen``)."""


class ComputerUseNotConfigured(ConfigurationError):
    """The arm cannot be built or run as configured; the message says what to set."""


def _default_screen(page: Page, viewport: Viewport) -> Screen:
    return PlaywrightScreen(page, viewport)


class ComputerUseArm(EndpointArm):
    """A computer-use model loop over the episode's browser page; see the module doc."""

    uses_browser = True
    uses_model = True
    """It counts its model calls: an episode that made none records 0, not null."""
    records_actions = True

    def __init__(
        self,
        *,
        name: str = "computer_use",
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        wire_format: str | None = None,
        viewport: Viewport | str | None = None,
        prices: PriceTable | str | os.PathLike[str] | None = None,
        budget: Budget | None = None,
        retry: RetryPolicy | None = None,
        keep_screenshots: int = 3,
        request_timeout_s: float = 120.0,
        screen: ScreenFactory | None = None,
        environ: Mapping[str, str] | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.name = name
        fmt = (wire_format or env.get(ENV_FORMAT) or "openai").strip().lower()
        if fmt not in FORMATS:
            raise ComputerUseNotConfigured(
                f"{ENV_FORMAT}={fmt!r} is not a wire format: use {' or '.join(FORMATS)}"
            )
        self.wire_format: WireFormat = "anthropic" if fmt == "anthropic" else "openai"
        raw_viewport = viewport if viewport is not None else env.get(ENV_VIEWPORT) or None
        try:
            self.viewport = (
                raw_viewport if isinstance(raw_viewport, Viewport)
                else Viewport() if raw_viewport is None
                else Viewport.parse(raw_viewport)
            )  # fmt: skip
        except ValueError as exc:
            raise ComputerUseNotConfigured(f"{ENV_VIEWPORT}: {exc}") from None
        try:
            self.endpoint = EndpointConfig.resolve(
                "computer_use", ENV_PREFIX, base_url=base_url, model=model, api_key=api_key,
                prices=prices, environ=env,
            )  # fmt: skip
        except PriceTableError as exc:
            raise ComputerUseNotConfigured(f"{ENV_PRICES}: {exc}") from None
        self.budget = Budget() if budget is None else budget
        self.retry = RetryPolicy() if retry is None else retry
        self.keep_screenshots = keep_screenshots
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s)
        self._screen = _default_screen if screen is None else screen
        self._sleep = sleep

    def preflight(self) -> None:
        """Before a run writes anything: no endpoint stops the run with one line."""
        if self.not_configured is not None:
            raise ComputerUseNotConfigured(self.not_configured)

    def _wire(
        self, session: aiohttp.ClientSession, env: EnvHandle, viewport: Viewport | None = None
    ) -> Wire:
        options = self.endpoint.client_options(env.telemetry, self.retry, self._sleep)
        size = self.viewport if viewport is None else viewport
        if self.wire_format == "anthropic":
            from effectbench.arms.computer_use.anthropic_wire import AnthropicWire, MessagesClient

            messages = MessagesClient(session, **options)
            return AnthropicWire(messages, size, self.keep_screenshots)
        from effectbench.arms.computer_use.openai_wire import OpenAiWire

        return OpenAiWire(ChatClient(session, **options), size, self.keep_screenshots)

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        if self.not_configured is not None:
            raise ComputerUseNotConfigured(self.not_configured)
        from effectbench.displays.vnc import VncChannel

        vnc = VncChannel.from_channels(env.channels)
        if vnc is not None:
            return await self._run_on_display(task, env, vnc)
        if env.browser is None:
            return AgentReport(reported_success=False, halted=True, message=NO_BROWSER)
        screen = self._screen(env.browser, self.viewport)
        opener = getattr(screen, "open", None)
        if callable(opener):
            await opener()
        sign_in = getattr(env.browser_driver, "sign_in", None)
        if callable(sign_in):  # a product whose pages need a login: the provider's account
            await sign_in(env.browser)
        base = env.channels.get("web_url") or env.channels.get("base_url")
        if base:
            await env.browser.goto(base)
        async with aiohttp.ClientSession(timeout=self._timeout) as session:
            wire = self._wire(session, env)
            return await run_loop(user_prompt(task), screen, wire, self.budget, env.telemetry)

    async def _run_on_display(self, task: TaskView, env: EnvHandle, vnc: VncChannel) -> AgentReport:
        """The loop over the episode's framebuffer: the viewport is the framebuffer's size."""
        from effectbench.arms.computer_use.vnc_screen import VncScreen
        from effectbench.displays.rfb import open_rfb

        async with open_rfb(vnc.password, host=vnc.host, port=vnc.port) as client:
            await client.capture()
            screen = VncScreen(client)
            async with aiohttp.ClientSession(timeout=self._timeout) as session:
                wire = self._wire(session, env, screen.viewport)
                return await run_loop(user_prompt(task), screen, wire, self.budget, env.telemetry)


def entry_point() -> ComputerUseArm:
    """The ``computer_use`` entry point: loads on any machine (``effectbench arms`` lists
    it); a missing endpoint is reported when a run starts (``preflight``)."""
    return ComputerUseArm()
