"""Roundup against the provider contract every third-party provider's tests inherit, on
one task (each episode is a roundup-server of its own, so each costs about a second)."""

from __future__ import annotations

from effectbench.testing import ProviderContract


class TestRoundupContract(ProviderContract):
    provider_name = "roundup"
    task_ids = ("roundup::csrf::note::ok",)
