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

__all__ = [
    "ChatClient",
    "Completion",
    "ModelEndpointError",
    "RetryPolicy",
    "post_with_retries",
    "usage_call",
]

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


async def post_with_retries(
    session: aiohttp.ClientSession,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    retry: RetryPolicy,
    telemetry: Telemetry,
    sleep: Sleep,
) -> tuple[bytes, float]:
    """POST ``body`` until a 200 (its body and the last attempt's latency in ms); a 429,
    5xx or connection error is retried under ``retry`` (each retry recorded as a
    ``model_retry`` action); anything else, or the last failure, is ModelEndpointError."""
    attempt = 0
    while True:
        t0 = time.perf_counter()
        try:
            async with session.post(url, data=body, headers=dict(headers)) as resp:
                status: int | None = resp.status
                retry_after, payload = resp.headers.get("Retry-After"), await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            status, retry_after, payload = None, None, f"{type(exc).__name__}: {exc}".encode()
        latency_ms = (time.perf_counter() - t0) * 1000.0
        if status == 200:
            return payload, latency_ms
        what = "the connection failed" if status is None else f"HTTP {status}"
        if status is not None and not _retryable(status):
            raise ModelEndpointError(f"model endpoint answered {what}: {_snippet(payload)}")
        if attempt >= retry.max_retries:
            raise ModelEndpointError(
                f"model endpoint gave up after {attempt + 1} attempts, last: {what}: "
                f"{_snippet(payload)}"
            )
        delay = retry.delay(attempt, retry_after)
        telemetry.action("model_retry", status=status, delay_s=delay)
        await sleep(delay)
        attempt += 1


def usage_call(
    usage: Mapping[str, Any],
    input_key: str,
    output_key: str,
    model: str,
    prices: PriceTable | None,
    latency_ms: float,
) -> ModelCall:
    """One call's ModelCall from an endpoint's usage object: counts it gave, else None;
    its reported ``cost``, else the price table's, else None."""
    tin, tout = _count(usage, input_key), _count(usage, output_key)
    cost, source = _reported_cost(usage), "arm"
    if cost is None:
        cost = None if prices is None else prices.cost(model, tin, tout)
        source = "" if cost is None or prices is None else prices.source
    return ModelCall(
        input_tokens=tin,
        output_tokens=tout,
        cost_usd=cost,
        latency_ms=latency_ms,
        cost_source=source or None,
        model=model,
    )


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
        payload, latency_ms = await post_with_retries(
            self._session, self._url, self._headers, body, self._retry, self._telemetry,
            self._sleep,
        )  # fmt: skip
        return self._completion(payload, latency_ms)

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
        call = usage_call(
            usage, "prompt_tokens", "completion_tokens", self._model, self._prices, latency_ms
        )
        self._telemetry.model_call(call)
        return Completion(message, call)


def _snippet(payload: bytes) -> str:
    text = " ".join(payload.decode("utf-8", "replace").split())
    return (text[:197] + "...") if len(text) > 200 else (text or "(empty body)")
