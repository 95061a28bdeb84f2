"""Where a model-calling arm's endpoint is, from its options or else the environment.

Shared by the ``llm`` and ``computer_use`` arms: each setting is the option given or,
when the option leaves it unset, ``<PREFIX>_BASE_URL``, ``<PREFIX>_MODEL``,
``<PREFIX>_API_KEY`` and ``<PREFIX>_PRICES`` (a price table file). ``missing`` says in one
line what to set when there is no endpoint or no model; ``client_options`` are the
keyword arguments of either endpoint client (``ChatClient``, ``MessagesClient``), and
``EndpointArm`` gives an arm holding one its ``base_url``, ``model``, ``prices`` and
``not_configured``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypedDict

import anyio
import attrs

from effectbench.arms.llm.client import RetryPolicy, Sleep
from effectbench.core.prices import PriceTable, load_prices
from effectbench.core.provider import Telemetry

__all__ = ["ClientOptions", "EndpointArm", "EndpointConfig"]


class ClientOptions(TypedDict):
    """The keyword arguments every endpoint client takes after its session."""

    base_url: str
    model: str
    api_key: str | None
    prices: PriceTable | None
    telemetry: Telemetry
    retry: RetryPolicy
    sleep: Sleep


@attrs.frozen
class EndpointConfig:
    """One arm's endpoint settings, each resolved from its option or its variable."""

    arm: str
    prefix: str
    base_url: str | None
    model: str | None
    api_key: str | None = attrs.field(repr=False)
    prices: PriceTable | None

    @classmethod
    def resolve(
        cls,
        arm: str,
        prefix: str,
        *,
        base_url: str | None,
        model: str | None,
        api_key: str | None,
        prices: PriceTable | str | os.PathLike[str] | None,
        environ: Mapping[str, str],
    ) -> EndpointConfig:
        """The settings as given, or from ``environ``; PriceTableError for a price table
        that cannot be read (the arm says which variable in its own error)."""
        if prices is None and environ.get(f"{prefix}_PRICES"):
            prices = environ[f"{prefix}_PRICES"]
        return cls(
            arm=arm,
            prefix=prefix,
            base_url=base_url or environ.get(f"{prefix}_BASE_URL") or None,
            model=model or environ.get(f"{prefix}_MODEL") or None,
            api_key=api_key or environ.get(f"{prefix}_API_KEY") or None,
            prices=(
                prices if prices is None or isinstance(prices, PriceTable) else load_prices(prices)
            ),
        )

    @property
    def missing(self) -> str | None:
        """What to set, in one line, when there is no endpoint or no model; else None."""
        url, model = f"{self.prefix}_BASE_URL", f"{self.prefix}_MODEL"
        need = [name for name, v in ((url, self.base_url), (model, self.model)) if not v]
        if not need:
            return None
        what = " and no ".join("endpoint" if n == url else "model" for n in need)
        return (
            f"the {self.arm} arm has no {what}: set {' and '.join(need)} "
            f"(e.g. {url}=http://127.0.0.1:8000/v1)"
        )

    def client_options(
        self, telemetry: Telemetry, retry: RetryPolicy, sleep: Sleep | None = None
    ) -> ClientOptions:
        """An endpoint client's arguments for one episode (only once ``missing`` is None)."""
        assert self.base_url is not None and self.model is not None, self.missing
        return ClientOptions(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            prices=self.prices,
            telemetry=telemetry,
            retry=retry,
            sleep=anyio.sleep if sleep is None else sleep,
        )


class EndpointArm:
    """What an arm that calls a model endpoint shows of its ``endpoint`` settings."""

    endpoint: EndpointConfig

    @property
    def base_url(self) -> str | None:
        return self.endpoint.base_url

    @property
    def model(self) -> str | None:
        return self.endpoint.model

    @property
    def prices(self) -> PriceTable | None:
        return self.endpoint.prices

    @property
    def not_configured(self) -> str | None:
        """What to set before the arm can run (one line), or None."""
        return self.endpoint.missing
