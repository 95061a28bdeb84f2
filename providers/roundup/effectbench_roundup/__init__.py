"""EffectBench on Roundup 2.6.0, a real issue tracker nobody here wrote."""

from effectbench_roundup.provider import RoundupProvider

__all__ = ["RoundupProvider"]
