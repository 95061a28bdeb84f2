"""EffectBench on I Hate Money 7.2.1, a real shared-expense ledger nobody here wrote."""

from effectbench_ihatemoney.provider import IHateMoneyProvider

__all__ = ["IHateMoneyProvider"]
