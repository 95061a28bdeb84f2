"""The price table that turns a model call's tokens into dollars.

A JSON file (the harness's ``--prices FILE``; for the LLM arm also
``EFFECTBENCH_LLM_PRICES`` or its ``prices`` option)::

    {"version": "2026-12-01",
     "models": {"gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.60}}}

Prices are USD per one million tokens. The version is recorded with every cost
computed from the table (``cost_source = "price_table:<version>"``), so a reader can
tell which prices a run's cost figures assumed. A cost the arm reported itself is
never replaced (``cost_source = "arm"``); the table prices only calls without one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs
import orjson

from effectbench.core.bounds import MAX_PRICE_PER_MTOK
from effectbench.core.errors import EffectBenchError
from effectbench.core.provider import ModelCall

__all__ = [
    "ModelPrice",
    "PriceTable",
    "PriceTableError",
    "load_prices",
    "parse_prices",
    "price_calls",
]


class PriceTableError(EffectBenchError, ValueError):
    """The price table file is missing or malformed; the message is one line."""


@attrs.frozen
class ModelPrice:
    input_per_mtok: float
    output_per_mtok: float


@attrs.frozen
class PriceTable:
    version: str
    models: Mapping[str, ModelPrice]

    @property
    def source(self) -> str:
        return f"price_table:{self.version}"

    def cost(self, model: str, input_tokens: int | None, output_tokens: int | None) -> float | None:
        """USD for one call, or None when the model is not priced or a count is unknown."""
        price = self.models.get(model)
        if price is None or input_tokens is None or output_tokens is None:
            return None
        return (
            input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok
        ) / 1_000_000


def _price(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PriceTableError(f"{where} must be a number of USD per 1M tokens")
    if not 0 <= value <= MAX_PRICE_PER_MTOK:  # NaN and the infinities fail too
        raise PriceTableError(
            f"{where} must be a finite, non-negative number of at most "
            f"{MAX_PRICE_PER_MTOK:g} USD per 1M tokens"
        )
    return float(value)


def parse_prices(doc: object, origin: str) -> PriceTable:
    """A PriceTable from a decoded JSON document; PriceTableError names the bad field."""
    if not isinstance(doc, dict):
        raise PriceTableError(
            f"{origin}: a price table is a JSON object with 'version' and 'models'"
        )
    version = doc.get("version")
    if not isinstance(version, str) or not version:
        raise PriceTableError(f"{origin}: 'version' must be a non-empty string")
    models = doc.get("models")
    if not isinstance(models, dict):
        raise PriceTableError(f"{origin}: 'models' must map model names to prices")
    table: dict[str, ModelPrice] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict):
            raise PriceTableError(f"{origin}: models.{name} must be an object")
        table[name] = ModelPrice(
            _price(f"{origin}: models.{name}.input_per_mtok", entry.get("input_per_mtok")),
            _price(f"{origin}: models.{name}.output_per_mtok", entry.get("output_per_mtok")),
        )
    return PriceTable(version, table)


def load_prices(path: str | os.PathLike[str]) -> PriceTable:
    """Read and check a price table file."""
    origin = os.fspath(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise PriceTableError(
            f"cannot read the price table {origin}: {exc.strerror or exc}"
        ) from None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise PriceTableError(f"{origin} is not JSON: {exc}") from None
    return parse_prices(doc, origin)


def price_call(call: ModelCall, table: PriceTable) -> ModelCall:
    """``call`` with its cost from the table when it has none and the table prices its
    model and tokens; otherwise unchanged (an arm's own figure always wins)."""
    if call.cost_usd is not None or call.model is None:
        return call
    cost = table.cost(call.model, call.input_tokens, call.output_tokens)
    if cost is None:
        return call
    return attrs.evolve(call, cost_usd=cost, cost_source=table.source)


def price_calls(calls: Iterable[ModelCall], table: PriceTable | None) -> list[ModelCall]:
    """Every call, priced by ``table`` where it lacks a cost (all unchanged without one)."""
    if table is None:
        return list(calls)
    return [price_call(c, table) for c in calls]
