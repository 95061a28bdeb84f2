"""A minimal OpenAI-compatible chat-completions client with bounded retries.

One ``POST <base_url>/chat/completions`` per call. A 429 or 5xx answer (or a
connection error) is retried with exponential backoff, at most ``max_retries``
times; a ``Retry-After`` header in seconds replaces the computed delay (capped, so a
hostile endpoint cannot park an episode). Every other failure is final.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp
import anyio
import attrs
import orjson

from effectbench.core.prices import PriceTable
from effectbench.core.provider import ModelCall, Telemetry

__all__ = ["ChatClient", "Completion", "ModelEndpointError", "RetryPolicy"]

Sleep = Callable[[float], Awaitable[None]]


class ModelEndpointError(Exception):
    """The endpoint gave no usable completion (after retries, where retrying applies)."""


@attrs.frozen
class RetryPolicy:
    """``max_retries`` extra attempts after the first; delay ``base_s * 2**n`` capped at
    ``max_delay_s``, or the endpoint's Retry-After when it sends one (same cap)."""

    max_retries: int = 4
    base_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, retry: int, retry_after: str | None) -> float:
        hinted = _seconds(retry_after)
        wanted = self.base_s * (2**retry) if hinted is None else hinted
        return min(wanted, self.max_delay_s)


def _seconds(header: str | None) -> float | None:
    """Retry-After as delta-seconds; an HTTP date or junk counts as absent."""
    if header is None:
        return None
    try:
        value = float(header.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _retryable(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


@attrs.frozen
class Completion:
    """The assistant message of one completion and the usage recorded for it."""

    message: Mapping[str, Any]
    call: ModelCall

    @property
    def total_tokens(self) -> int:
        return (self.call.input_tokens or 0) + (self.call.output_tokens or 0)


def _count(usage: Mapping[str, Any], key: str) -> int | None:
    v = usage.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _reported_cost(usage: Mapping[str, Any]) -> float | None:
    v = usage.get("cost")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) and v >= 0 else None


class ChatClient:
    """Chat completions for one episode over one aiohttp session."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        prices: PriceTable | None,
        telemetry: Telemetry,
        retry: RetryPolicy,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self._session = session
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._prices = prices
        self._telemetry = telemetry
        self._retry = retry
        self._sleep = sleep

    async def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Completion:
        """One completion; records it on the telemetry. Raises ModelEndpointError."""
        body = orjson.dumps(
            {"model": self._model, "messages": list(messages), "tools": list(tools)}
        )
        retry = 0
        while True:
            t0 = time.perf_counter()
            try:
                status, retry_after, payload = await self._post(body)
            except (aiohttp.ClientError, TimeoutError) as exc:
                status, retry_after, payload = None, None, f"{type(exc).__name__}: {exc}".encode()
            latency_ms = (time.perf_counter() - t0) * 1000.0
            if status == 200:
                return self._completion(payload, latency_ms)
            what = "the connection failed" if status is None else f"HTTP {status}"
            if status is not None and not _retryable(status):
                raise ModelEndpointError(f"model endpoint answered {what}: {_snippet(payload)}")
            if retry >= self._retry.max_retries:
                raise ModelEndpointError(
                    f"model endpoint gave up after {retry + 1} attempts, last: {what}: "
                    f"{_snippet(payload)}"
                )
            delay = self._retry.delay(retry, retry_after)
            self._telemetry.action("model_retry", status=status, delay_s=delay)
            await self._sleep(delay)
            retry += 1

    async def _post(self, body: bytes) -> tuple[int, str | None, bytes]:
        async with self._session.post(self._url, data=body, headers=self._headers) as resp:
            return resp.status, resp.headers.get("Retry-After"), await resp.read()

    def _completion(self, payload: bytes, latency_ms: float) -> Completion:
        try:
            doc = orjson.loads(payload)
            message = doc["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise ModelEndpointError(
                f"model endpoint's answer is not a chat completion ({type(exc).__name__}: {exc})"
            ) from None
        usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
        tin, tout = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
        cost, source = _reported_cost(usage), "arm"
        if cost is None:
            cost = None if self._prices is None else self._prices.cost(self._model, tin, tout)
            source = "" if cost is None or self._prices is None else self._prices.source
        call = ModelCall(
            input_tokens=tin,
            output_tokens=tout,
            cost_usd=cost,
            latency_ms=latency_ms,
            cost_source=source or None,
            model=self._model,
        )
        self._telemetry.model_call(call)
        return Completion(message, call)


def _snippet(payload: bytes) -> str:
    text = " ".join(payload.decode("utf-8", "replace").split())
    return (text[:197] + "...") if len(text) > 200 else (text or "(empty body)")
