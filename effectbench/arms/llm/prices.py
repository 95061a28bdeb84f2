"""The LLM arm's price table: the harness's one, in ``effectbench.core.prices``.

Kept as a name the arm's users already import; the code lives one layer down so the
harness (``--prices``) and the arm price tokens with the same table and rules.
"""

from effectbench.core.prices import (
    ModelPrice,
    PriceTable,
    PriceTableError,
    load_prices,
    parse_prices,
    price_calls,
)

__all__ = [
    "ModelPrice",
    "PriceTable",
    "PriceTableError",
    "load_prices",
    "parse_prices",
    "price_calls",
]
