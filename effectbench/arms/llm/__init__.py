"""``llm``: a language-model arm over any OpenAI-compatible chat-completions endpoint.

Configured by options (``LlmArm(base_url=..., model=...)``) or, for what an option
leaves unset, by the environment: ``EFFECTBENCH_LLM_BASE_URL`` (e.g.
``http://127.0.0.1:8000/v1``), ``EFFECTBENCH_LLM_MODEL``, ``EFFECTBENCH_LLM_API_KEY``
and ``EFFECTBENCH_LLM_PRICES`` (a price table file, see ``prices``). The registered
entry point refuses to build an arm without a base URL and a model, so
``effectbench run --arm llm`` stops at once with one line saying what to set; an arm
built in Python without them fails each of its episodes with that reason instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

import aiohttp

from effectbench.arms.llm.client import ChatClient, ModelEndpointError, RetryPolicy, Sleep
from effectbench.arms.llm.endpoint import EndpointArm, EndpointConfig
from effectbench.arms.llm.loop import Budget, run_loop
from effectbench.arms.llm.tools import tools_for
from effectbench.core.arm import TaskView
from effectbench.core.errors import ConfigurationError
from effectbench.core.model import AgentReport
from effectbench.core.prices import PriceTable, PriceTableError
from effectbench.core.provider import EnvHandle

__all__ = [
    "Budget",
    "LlmArm",
    "LlmNotConfigured",
    "ModelEndpointError",
    "PriceTable",
    "PriceTableError",
    "RetryPolicy",
    "entry_point",
    "from_environment",
]

ENV_PREFIX: Final = "EFFECTBENCH_LLM"
ENV_BASE_URL: Final = f"{ENV_PREFIX}_BASE_URL"
ENV_MODEL: Final = f"{ENV_PREFIX}_MODEL"
ENV_API_KEY: Final = f"{ENV_PREFIX}_API_KEY"
ENV_PRICES: Final = f"{ENV_PREFIX}_PRICES"


class LlmNotConfigured(ConfigurationError):
    """No endpoint or model to call; the message says what to set."""


class LlmArm(EndpointArm):
    """A tool-calling model loop; see the module docstring for its configuration."""

    uses_model = True
    """It counts its model calls: an episode that made none records 0, not null."""
    records_actions = True
    """It acts only through its tools, each call recorded: no tool call is 0 actions."""

    def __init__(
        self,
        *,
        name: str = "llm",
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        prices: PriceTable | str | os.PathLike[str] | None = None,
        budget: Budget | None = None,
        retry: RetryPolicy | None = None,
        request_timeout_s: float = 120.0,
        environ: Mapping[str, str] | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        self.name = name
        self.endpoint = EndpointConfig.resolve(
            "llm", ENV_PREFIX, base_url=base_url, model=model, api_key=api_key,
            prices=prices, environ=os.environ if environ is None else environ,
        )  # fmt: skip
        self.budget = Budget() if budget is None else budget
        self.retry = RetryPolicy() if retry is None else retry
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s)
        self._sleep = sleep

    def preflight(self) -> None:
        """Called by the harness before a run writes anything: an arm with no endpoint
        stops the run with one line instead of failing every episode."""
        if self.not_configured is not None:
            raise LlmNotConfigured(self.not_configured)

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        if self.not_configured is not None:
            raise LlmNotConfigured(self.not_configured)
        async with aiohttp.ClientSession(timeout=self._timeout) as session:
            options = self.endpoint.client_options(env.telemetry, self.retry, self._sleep)
            client = ChatClient(session, **options)
            return await run_loop(task, client, tools_for(env, session), self.budget, env.telemetry)


def entry_point() -> LlmArm:
    """The ``llm`` entry point: loads on any machine, so ``effectbench arms`` lists it as
    loaded; a missing endpoint is reported when a run starts (``preflight``). A price
    table that cannot be read is a broken plugin (LlmNotConfigured, one line)."""
    try:
        return LlmArm()
    except PriceTableError as exc:
        raise LlmNotConfigured(f"{ENV_PRICES}: {exc}") from None


def from_environment() -> LlmArm:
    """The ``llm`` entry point: an arm from the environment, or LlmNotConfigured (one line)."""
    arm = entry_point()
    if arm.not_configured is not None:
        raise LlmNotConfigured(arm.not_configured)
    return arm
