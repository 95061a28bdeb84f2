"""Old import path ``effectbench.arms.llm.prices``: the price table is the harness's one,
in ``effectbench.core.prices`` (so ``--prices`` and the LLM arm price tokens with the same
table and rules). Every name warns (DeprecationWarning) and the path goes in
effectbench 0.3 (docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.core.prices": (
            "ModelPrice",
            "PriceTable",
            "PriceTableError",
            "load_prices",
            "parse_prices",
            "price_calls",
        ),
    },
)
